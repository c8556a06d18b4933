package engine

import (
	"net/netip"
	"testing"
)

// TestIsOutsider: without a membership test every source is a member; with
// one, an address is an outsider unless the test or this host's links name
// it.
func TestIsOutsider(t *testing.T) {
	member := netip.MustParseAddr("10.0.0.2").As16()
	stranger := netip.MustParseAddr("10.0.0.9").As16()
	h := NewHost()
	for _, tc := range []struct {
		name    string
		members Members
		gid     [16]byte
		want    bool
	}{
		{"no switch: a stranger", nil, stranger, false},
		{"a member", func(g [16]byte) bool { return g == member }, member, false},
		{"a stranger", func(g [16]byte) bool { return g == member }, stranger, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.SetMembers(tc.members)
			if got := h.IsOutsider(tc.gid); got != tc.want {
				t.Fatalf("IsOutsider(%v) = %v, want %v", netip.AddrFrom16(tc.gid).Unmap(), got, tc.want)
			}
		})
	}
	h.SetMembers(func([16]byte) bool { return false })
	if n := testing.AllocsPerRun(100, func() { h.IsOutsider(stranger) }); n != 0 {
		t.Fatalf("IsOutsider allocates %v times a call; it runs per packet", n)
	}
}
