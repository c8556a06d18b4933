package switchagent

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/fakelink"
)

// TestResolveLID: the agent follows the subnet manager's LIDs — each
// host's default instance has one, and the daemon hears when they change
// — and resolves another host's LID to the first GID of that host that
// this host routes to, in the source GID's family: an RDMA uplink's GID
// (its link-local one for a link-local source), or the host's address on
// the TCP channel. Its own host's LIDs, LIDs no port has and those of a
// host that left are refused, each with its own error.
func TestResolveLID(t *testing.T) {
	net := fakelink.New(1)
	up1 := net.Link("rxe0", [6]byte{2, 0, 0, 0, 0, 1}, netip.MustParseAddr("10.0.0.1"))
	up2 := net.Link("rxe0", [6]byte{2, 0, 0, 0, 0, 2}, netip.MustParseAddr("10.0.0.2"))
	h1, h2 := newFakeHost(t), newFakeHost(t)
	h1.uplinks = []Uplink{{Name: "rxe0", Link: up1}}
	h2.uplinks = []Uplink{{Name: "rxe0", Link: up2}}
	as := pair(t, "", h1, h2)

	var lid1, lid2 uint16
	waitUntil(t, "host1 knows both hosts' default LIDs", func() bool {
		lid1 = as[0].LocalLID(fabric.HostDefaultInstance("host1"), 0)
		lid2 = as[1].LocalLID(fabric.HostDefaultInstance("host2"), 0)
		t := as[0].lids.Load()
		return lid1 != 0 && lid2 != 0 && t != nil && t.byLID[lid2].Host == "host2"
	})
	if lid1 == lid2 {
		t.Fatalf("both hosts' default adapters have LID %#x", lid1)
	}
	if got := as[0].LocalLID(fabric.HostDefaultInstance("host2"), 0); got != 0 {
		t.Errorf("host1's LocalLID of host2's default adapter is %#x: want 0, it is not host1's", got)
	}
	h1.mu.Lock()
	told := h1.lidsSeen
	h1.mu.Unlock()
	if told == 0 {
		t.Error("the daemon was never told that the LIDs changed")
	}

	g := func(s string) [16]byte { return netip.MustParseAddr(s).As16() }
	ll1, ll2 := up1.GIDs()[0], up2.GIDs()[0]
	free := uint16(fabric.MaxUnicastLID)
	for free == lid1 || free == lid2 {
		free--
	}
	tests := []struct {
		name string
		lid  uint16
		sgid [16]byte
		want [16]byte
		err  error
	}{
		{"IPv4 source: host2's uplink address", lid2, g("10.0.0.1"), g("10.0.0.2"), nil},
		{"link-local source: host2's link-local uplink GID", lid2, ll1, ll2, nil},
		{"source on the TCP channel: host2's first IPv4 GID", lid2, g("127.0.0.1"), g("10.0.0.2"), nil},
		{"this host's own LID", lid1, g("10.0.0.1"), [16]byte{}, ErrUnknownLID},
		{"a LID no port has", free, g("10.0.0.1"), [16]byte{}, ErrUnknownLID},
	}
	for _, tt := range tests {
		got, err := as[0].ResolveLID(tt.lid, tt.sgid)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("%s: ResolveLID(%#x, %v) = %v, %v; want %v, %v", tt.name, tt.lid, netip.AddrFrom16(tt.sgid), netip.AddrFrom16(got), err, netip.AddrFrom16(tt.want), tt.err)
		}
	}

	// host2 leaves: its LID stays assigned (its daemon may come back) but
	// no longer resolves.
	as[1].Close()
	waitUntil(t, "host1 sees host2 leave", func() bool { return as[0].Status().HostsGone == 1 })
	if _, err := as[0].ResolveLID(lid2, g("10.0.0.1")); !errors.Is(err, ErrUnreachableLID) {
		t.Errorf("ResolveLID of a host that left: %v; want ErrUnreachableLID", err)
	}
}
