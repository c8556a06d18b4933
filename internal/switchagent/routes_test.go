package switchagent

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fakelink"
	"github.com/vrdma/vrdma/internal/pathsel"
)

// TestRoutes: the router the agent installs takes an RDMA uplink only
// between GIDs on both hosts' RDMA uplinks, the TCP channel (counted)
// between any other GIDs of hosts on the switch, and leaves GIDs the
// switch does not know to the engine; it goes when the agent leaves.
func TestRoutes(t *testing.T) {
	net := fakelink.New(1)
	up1 := net.Link("rxe0", [6]byte{2, 0, 0, 0, 0, 1}, netip.MustParseAddr("10.0.0.1"))
	up2 := net.Link("rxe0", [6]byte{2, 0, 0, 0, 0, 2}, netip.MustParseAddr("10.0.0.2"))
	h1, h2 := newFakeHost(t), newFakeHost(t)
	h1.uplinks = []Uplink{{Name: "rxe0", Link: up1}}
	h2.uplinks = []Uplink{{Name: "rxe0", Link: up2}}
	as := pair(t, "", h1, h2)

	rdma1, rdma2 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	tcp1, tcp2 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	tests := []struct {
		name       string
		sgid, dgid netip.Addr
		ok         bool   // the switch routes it
		path       string // and picks this path
	}{
		{"uplink to uplink", rdma1, rdma2, true, engine.PathRDMA},
		{"from the TCP channel's address to an uplink", tcp1, rdma2, true, engine.PathTCP},
		{"to the other host's TCP channel address", rdma1, tcp2, true, engine.PathTCP},
		{"to a GID the switch does not know", rdma1, netip.MustParseAddr("192.0.2.1"), false, ""},
	}
	fallbacks := uint64(0)
	for _, tt := range tests {
		r, ok := h1.route(tt.sgid, tt.dgid)
		if ok != tt.ok || ok && r.Path != tt.path {
			t.Errorf("%s: route %+v, %v; want %v, %q", tt.name, r, ok, tt.ok, tt.path)
			continue
		}
		switch {
		case r.Path == engine.PathRDMA && r.Link != engine.Link(up1):
			t.Errorf("%s: rdma on link %v, want host1's uplink", tt.name, r.Link.Name())
		case r.Path == engine.PathTCP && r.Link.Name() != TCPLinkName:
			t.Errorf("%s: tcp on link %v, want the TCP channel", tt.name, r.Link.Name())
		}
		if r.Path == engine.PathTCP {
			fallbacks++
		}
	}
	if got := as[0].Status().Fallbacks; got != fallbacks {
		t.Errorf("%d fallbacks to the TCP channel counted, want %d", got, fallbacks)
	}
	self, peer := as[0].Record().Name, as[1].Record().Name
	if c, ok := as[0].RouteChoice(peer); !ok || c.Kind != pathsel.RDMA {
		t.Errorf("host1's route table's choice for host2: %v, %v; want rdma", c, ok)
	}
	if c, ok := as[0].RouteChoice(self); ok {
		t.Errorf("host1's route table has a choice for itself: %v", c)
	}
	rec := as[0].Record()
	var names []string
	for _, u := range rec.Uplinks {
		names = append(names, u.Name+":"+string(u.State))
	}
	if got := strings.Join(names, " "); got != "rxe0:up tcp:up" {
		t.Errorf("host1's record has uplinks %q, want rxe0, then the TCP channel", got)
	}
	if _, ok := h2.route(rdma2, rdma1); !ok {
		t.Error("host2's router does not route to host1")
	}
	as[1].Close() // host2's, whose etcd is host1's: host1's leaves last
	if _, ok := h2.route(rdma2, rdma1); ok {
		t.Error("the router routes after the agent left")
	}
}

// TestHostLeaves: when a host leaves the switch, the QPs towards it fail,
// with a reason that names it.
func TestHostLeaves(t *testing.T) {
	h1 := newFakeHost(t)
	as := pair(t, "", h1)
	as[1].Close()
	waitUntil(t, "host1 sees host2 leave", func() bool { return as[0].Status().HostsGone == 1 })
	h1.mu.Lock()
	defer h1.mu.Unlock()
	if len(h1.failed) != 1 || !strings.Contains(h1.failed[0], "host host2 left the switch") {
		t.Errorf("QPs failed with %q, want once, naming host2", h1.failed)
	}
}
