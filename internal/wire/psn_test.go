package wire

import "testing"

func TestPSNAdd(t *testing.T) {
	tests := []struct {
		a    uint32
		n    int
		want uint32
	}{
		{0, 0, 0},
		{0, 1, 1},
		{0xfffffe, 1, 0xffffff},
		{0xffffff, 1, 0},
		{0xffffff, 2, 1},
		{0, -1, 0xffffff},
		{5, -6, 0xffffff},
		{0x800000, 0x800000, 0},
		{0x123456, 1 << 24, 0x123456},
		{0x123456, -(1 << 24), 0x123456},
		{0xff000001, 1, 2}, // bits above 24 are dropped
		{0, 4, 4},          // a 4 KiB READ at MTU 1024 consumes 4 PSNs
	}
	for _, tt := range tests {
		if got := PSNAdd(tt.a, tt.n); got != tt.want {
			t.Errorf("PSNAdd(%#x, %d) = %#x, want %#x", tt.a, tt.n, got, tt.want)
		}
	}
}

func TestPSNDiff(t *testing.T) {
	tests := []struct {
		a, b uint32
		want int32
	}{
		{0, 0, 0},
		{1, 0, 1},
		{0, 1, -1},
		{0, 0xffffff, 1},  // wrap: 0 is just after 0xffffff
		{0xffffff, 0, -1}, // and 0xffffff just before 0
		{5, 0xfffffb, 10},
		{0xfffffb, 5, -10},
		{0x7fffff, 0, 0x7fffff},
		{0x800000, 0, -0x800000}, // half the space apart: counts as before
		{0, 0x800000, -0x800000},
		{0x1000010, 0x10, 0}, // bits above 24 are ignored
		{0x123456, 0x123450, 6},
	}
	for _, tt := range tests {
		if got := PSNDiff(tt.a, tt.b); got != tt.want {
			t.Errorf("PSNDiff(%#x, %#x) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	// PSNDiff inverts PSNAdd within the signed 24-bit range.
	for _, a := range []uint32{0, 1, 0x7fffff, 0x800000, 0xfffff0, 0xffffff} {
		for _, n := range []int{-0x800000, -1000, -1, 0, 1, 128, 0x7fffff} {
			if got := PSNDiff(PSNAdd(a, n), a); got != int32(n) {
				t.Errorf("PSNDiff(PSNAdd(%#x, %d), %#x) = %d", a, n, a, got)
			}
		}
	}
}
