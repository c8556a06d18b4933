package tcplink

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma/internal/wire"
)

// TestGroupFrames: a group-tagged frame to a multicast group goes, tag
// and all, to each host GroupHosts names and arrives as it was sent; to a
// group no other host has (GroupHosts names none) it counts as sent to
// nobody, not as a drop; without GroupHosts it is dropped for want of a
// peer.
func TestGroupFrames(t *testing.T) {
	group := netip.MustParseAddr("239.1.2.3")
	var eps endpoints
	b := openNode(t, &eps, addrB, 0, nil)
	a := openNode(t, &eps, addrA, 0, func(c *Config) {
		c.GroupHosts = func(netip.Addr) []netip.Addr { return []netip.Addr{addrB} }
	})
	connectPair(t, a, b)
	f := append(wire.AppendGroupTag(nil, "uid 1000"), testFrame(addrA, group, 1, []byte("to the group"))...)
	if n, err := a.WriteBatch([][]byte{f}); n != 1 || err != nil {
		t.Fatalf("WriteBatch of a tagged frame: %d, %v; want 1, nil", n, err)
	}
	waitFor(t, "the tagged frame at b", func() bool { return b.sink.count() == 1 })
	if got := b.sink.got()[0]; !bytes.Equal(got, f) {
		t.Errorf("b got %x, want the frame as sent, %x", got, f)
	}

	var eps2 endpoints
	alone := openNode(t, &eps2, netip.MustParseAddr("127.0.0.3"), 0, func(c *Config) {
		c.GroupHosts = func(netip.Addr) []netip.Addr { return nil }
	})
	if n, err := alone.WriteBatch([][]byte{f}); n != 1 || err != nil {
		t.Errorf("WriteBatch to a group no other host has: %d, %v; want 1, nil", n, err)
	}
	if s := alone.Stats(); s.DroppedNoPeer != 0 || s.DroppedQueueFull != 0 {
		t.Errorf("a frame to nobody counted as dropped: %+v", s)
	}
	none := openNode(t, &eps2, netip.MustParseAddr("127.0.0.4"), 0, nil)
	if n, _ := none.WriteBatch([][]byte{f}); n != 0 || none.Stats().DroppedNoPeer != 1 {
		t.Errorf("without GroupHosts: %d sent, %d dropped for no peer; want 0, 1", n, none.Stats().DroppedNoPeer)
	}
}
