package perf

import (
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma"
)

func TestPickGIDFollowsTheControlConnection(t *testing.T) {
	gid := func(s string) vrdma.GID { return vrdma.GID(netip.MustParseAddr(s).As16()) }
	linkLocal, v4a, v4b, global := gid("fe80::1"), gid("::ffff:10.0.0.1"), gid("::ffff:127.0.0.1"), gid("2001:db8::1")
	tests := []struct {
		name  string
		gids  []vrdma.GID
		local string // "" for none
		want  int
	}{
		{"IPv4: the GID of the address", []vrdma.GID{linkLocal, v4a, v4b}, "127.0.0.1", 2},
		{"IPv4: else the first IPv4-mapped", []vrdma.GID{linkLocal, v4a, v4b}, "192.0.2.9", 1},
		{"IPv4: else 0", []vrdma.GID{linkLocal, global}, "127.0.0.1", 0},
		{"IPv4 on a dual-stack socket", []vrdma.GID{linkLocal, v4a, v4b}, "::ffff:127.0.0.1", 2},
		{"IPv6: the GID of the address", []vrdma.GID{v4a, linkLocal, global}, "2001:db8::1", 2},
		{"IPv6: else the first not IPv4", []vrdma.GID{v4a, linkLocal, global}, "::1", 1},
		{"IPv6: else 0", []vrdma.GID{v4a, v4b}, "::1", 0},
		{"no GIDs", nil, "127.0.0.1", 0},
		{"no address", []vrdma.GID{v4a, linkLocal}, "", 1},
	}
	for _, tt := range tests {
		var local netip.Addr
		if tt.local != "" {
			local = netip.MustParseAddr(tt.local)
		}
		if got := pickGID(tt.gids, local); got != tt.want {
			t.Errorf("%s: pickGID = %d, want %d", tt.name, got, tt.want)
		}
	}
}
