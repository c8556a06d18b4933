package switchagent

import (
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/fakelink"
)

// TestRoutesToADevice: a RoCE v2 GID of another host's verbs uplink whose
// daemon carries QPs there is where the QPs of instances bound to it are:
// the engine's QPs reach it over this host's RDMA uplink (software RoCEv2
// is wire-compatible with the device), though the hosts' choice is the TCP
// channel (the other host has no rxe uplink); from a GID on no RDMA uplink
// it can only fall back to the TCP channel, counted. A device that does
// not carry QPs keeps the hosts' choice.
func TestRoutesToADevice(t *testing.T) {
	for _, carries := range []bool{true, false} {
		net := fakelink.New(1)
		up1 := net.Link("rxe0", [6]byte{2, 0, 0, 0, 0, 1}, netip.MustParseAddr("10.0.0.1"))
		devGID := netip.MustParseAddr("::ffff:10.0.0.9")
		h1, h2 := newFakeHost(t), newFakeHost(t)
		h1.uplinks = []Uplink{{Name: "rxe0", Link: up1}}
		h2.uplinks = []Uplink{{Name: "hca0", Verbs: &VerbsUplink{Device: "rxe0", LinkLayer: "Ethernet", Transport: "InfiniBand", Up: true, MTU: 1024,
			GIDs: [][16]byte{devGID.As16()}, GIDTypes: []string{"RoCE v2"}, Caps: &fabric.VerbsCaps{Atomic: fabric.AtomicHCA, MaxSGE: 32, MaxQPWR: 16384},
			CarriesQPs: carries, Carries: map[bool][]string{true: {"RC QPs"}}[carries]}}}
		pair(t, "", h1, h2)
		want := engine.PathTCP
		if carries {
			want = engine.PathRDMA
		}
		r, ok := h1.route(netip.MustParseAddr("10.0.0.1"), devGID)
		if !ok || r.Path != want {
			t.Errorf("carries %v: route to the device's GID %+v, %v; want %s", carries, r, ok, want)
		} else if want == engine.PathRDMA && r.Link != engine.Link(up1) {
			t.Errorf("carries %v: rdma on %s, want host1's rxe0", carries, r.Link.Name())
		}
		if r, ok := h1.route(netip.MustParseAddr("127.0.0.1"), devGID); !ok || r.Path != engine.PathTCP {
			t.Errorf("carries %v: from a GID on no RDMA uplink: %+v, %v; want the TCP channel", carries, r, ok)
		}
	}
}
