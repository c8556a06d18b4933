package abi

import (
	"errors"
	"math"
	"testing"
)

func TestRingLayoutValidate(t *testing.T) {
	tests := []struct {
		name   string
		l      RingLayout
		region int
		ok     bool
	}{
		{"one entry", RingLayout{Offset: 0, Entries: 1, Stride: 16}, RingHeaderSize + 16, true},
		{"max entries", RingLayout{Offset: 0, Entries: MaxRingEntries, Stride: 16}, RingHeaderSize + MaxRingEntries*16, true},
		{"second ring", RingLayout{Offset: 512, Entries: 4, Stride: 64}, 512 + RingHeaderSize + 4*64, true},
		{"exact fit", RingLayout{Offset: 256, Entries: 8, Stride: 32}, 256 + RingHeaderSize + 8*32, true},
		{"zero entries", RingLayout{Entries: 0, Stride: 16}, 1 << 20, false},
		{"negative entries", RingLayout{Entries: -4, Stride: 16}, 1 << 20, false},
		{"entries not pow2", RingLayout{Entries: 3, Stride: 16}, 1 << 20, false},
		{"too many entries", RingLayout{Entries: MaxRingEntries * 2, Stride: 16}, 1 << 30, false},
		{"huge entries", RingLayout{Entries: math.MinInt, Stride: 16}, math.MaxInt, false},
		{"stride too small", RingLayout{Entries: 4, Stride: 8}, 1 << 20, false},
		{"stride zero", RingLayout{Entries: 4, Stride: 0}, 1 << 20, false},
		{"stride negative", RingLayout{Entries: 4, Stride: -16}, 1 << 20, false},
		{"stride not pow2", RingLayout{Entries: 4, Stride: 48}, 1 << 20, false},
		{"negative offset", RingLayout{Offset: -256, Entries: 4, Stride: 16}, 1 << 20, false},
		{"unaligned offset", RingLayout{Offset: 100, Entries: 4, Stride: 16}, 1 << 20, false},
		{"one byte short", RingLayout{Offset: 256, Entries: 8, Stride: 32}, 256 + RingHeaderSize + 8*32 - 1, false},
		{"past region", RingLayout{Offset: 1 << 20, Entries: 4, Stride: 16}, 1 << 20, false},
		{"empty region", RingLayout{Entries: 1, Stride: 16}, 0, false},
		// Layouts whose size overflows int must not wrap around into "fits".
		{"stride overflows size", RingLayout{Entries: 8, Stride: 1 << 61}, 1 << 20, false},
		{"stride max pow2", RingLayout{Entries: 1, Stride: 1 << 62}, 1 << 20, false},
		{"negative region", RingLayout{Entries: 1, Stride: 16}, -1, false},
		{"min int region", RingLayout{Offset: 256, Entries: 1, Stride: 16}, math.MinInt, false},
		{"offset overflows end", RingLayout{Offset: math.MaxInt - 255, Entries: 1, Stride: 16}, 1 << 20, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.Validate(tt.region)
			if tt.ok && err != nil {
				t.Fatalf("Validate(%d) = %v, want nil", tt.region, err)
			}
			if !tt.ok {
				if err == nil {
					t.Fatalf("Validate(%d) accepted %+v", tt.region, tt.l)
				}
				if err.Error() == "" {
					t.Fatal("empty error message")
				}
			}
		})
	}
}

func TestRingLayoutEntry(t *testing.T) {
	l := RingLayout{Offset: 512, Entries: 8, Stride: 64}
	if l.Size() != RingHeaderSize+8*64 {
		t.Fatalf("Size = %d", l.Size())
	}
	for _, c := range []struct {
		idx  uint32
		want int
	}{
		{0, 512 + 256}, {1, 512 + 256 + 64}, {7, 512 + 256 + 7*64}, {8, 512 + 256}, {9, 512 + 256 + 64},
		{math.MaxUint32, 512 + 256 + 7*64},
	} {
		if got := l.Entry(c.idx); got != c.want {
			t.Errorf("Entry(%d) = %d, want %d", c.idx, got, c.want)
		}
		if off := l.Entry(c.idx); off < l.Offset+RingHeaderSize || off+l.Stride > l.Offset+l.Size() {
			t.Errorf("Entry(%d) = %d is outside the ring", c.idx, off)
		}
	}
}

func TestRingLayoutPending(t *testing.T) {
	l := RingLayout{Entries: 16, Stride: 16}
	const max32 = math.MaxUint32
	tests := []struct {
		name       string
		prod, cons uint32
		want       int
		err        error
	}{
		{"empty", 0, 0, 0, nil},
		{"one", 1, 0, 1, nil},
		{"full", 16, 0, 16, nil},
		{"empty high", 1000, 1000, 0, nil},
		{"full high", 1016, 1000, 16, nil},
		{"wrap empty", max32, max32, 0, nil},
		{"wrap one", 0, max32, 1, nil},
		{"wrap full", 15, max32 - 0, 16, nil},
		{"wrap across", 5, max32 - 4, 10, nil},
		{"one over", 17, 0, 0, ErrCorruptRing},
		{"consumer ahead", 0, 1, 0, ErrCorruptRing},
		{"consumer far ahead", 100, 200, 0, ErrCorruptRing},
		{"wrap over", 16, max32, 0, ErrCorruptRing},
		{"half way", 1 << 31, 0, 0, ErrCorruptRing},
		{"max apart", max32, 0, 0, ErrCorruptRing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := l.Pending(tt.prod, tt.cons)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("Pending(%d, %d) err = %v, want %v", tt.prod, tt.cons, err, tt.err)
			}
			if n != tt.want {
				t.Fatalf("Pending(%d, %d) = %d, want %d", tt.prod, tt.cons, n, tt.want)
			}
		})
	}
}

func TestRingLayoutPendingMaxEntries(t *testing.T) {
	l := RingLayout{Entries: MaxRingEntries, Stride: 16}
	if n, err := l.Pending(MaxRingEntries-1, math.MaxUint32); err != nil || n != MaxRingEntries {
		t.Fatalf("full ring across the wrap: %d, %v", n, err)
	}
	if _, err := l.Pending(MaxRingEntries+1, 0); !errors.Is(err, ErrCorruptRing) {
		t.Fatalf("over-full ring: %v", err)
	}
}

func TestRoundPow2AndStrides(t *testing.T) {
	for _, c := range []struct{ in, want int }{
		{-5, 1}, {0, 1}, {1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {1000, 1024}, {1024, 1024}, {1025, 2048},
	} {
		if got := RoundPow2(c.in); got != c.want {
			t.Errorf("RoundPow2(%d) = %d, want %d", c.in, got, c.want)
		}
	}
	for _, c := range []struct{ sge, inline, want int }{
		{0, 0, 64}, {1, 0, 128}, {4, 0, 128}, {4, 64, 128}, {4, 65, 256}, {16, 0, 512}, {0, 256, 512},
	} {
		if got := SendStride(c.sge, c.inline); got != c.want {
			t.Errorf("SendStride(%d, %d) = %d, want %d", c.sge, c.inline, got, c.want)
		}
	}
	for _, c := range []struct{ sge, want int }{{0, 16}, {1, 32}, {2, 64}, {3, 64}, {16, 512}} {
		if got := RecvStride(c.sge); got != c.want {
			t.Errorf("RecvStride(%d) = %d, want %d", c.sge, got, c.want)
		}
	}
	// Every stride a queue can be created with passes Validate.
	for sge := 0; sge <= MaxSGE; sge++ {
		for _, s := range []int{SendStride(sge, 0), SendStride(sge, 256), RecvStride(sge)} {
			l := RingLayout{Entries: 4, Stride: s}
			if err := l.Validate(l.Size()); err != nil {
				t.Errorf("stride %d: %v", s, err)
			}
		}
	}
}
