package tcplink

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// A peer that goes away and comes back on the same endpoint: frames sent
// meanwhile are dropped and counted, then the link reconnects and frames
// flow again, both ways.
func TestPeerRestart(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, nil)
	b := openNode(t, &eps, addrB, 0, nil)
	connectPair(t, a, b)
	_, port, _ := net.SplitHostPort(b.ListenAddr().String())
	b.stop(t)
	waitFor(t, "A to see B go", func() bool { return a.connCount() == 0 })

	// B is down: A's frames find no one.
	send(t, a.Link, testFrame(addrA, addrB, 1, nil))
	waitFor(t, "a failed dial", func() bool { return a.Stats().DialErrors > 0 })
	if ps := a.Peers(); len(ps) != 1 || ps[0].LastError == nil {
		t.Fatalf("A's peers %+v: want one with the dial's error", ps)
	} else {
		t.Logf("while B is down: %s, %v", ps[0].State, ps[0].LastError)
	}
	waitFor(t, "the frame to be dropped", func() bool { return a.Stats().DroppedNoPeer > 0 })

	p, _ := net.LookupPort("tcp", port)
	b2 := openNode(t, &eps, addrB, p, nil)
	waitFor(t, "a frame to the restarted peer", func() bool {
		_, _ = a.WriteBatch([][]byte{testFrame(addrA, addrB, 2, nil)})
		time.Sleep(time.Millisecond)
		return b2.sink.count() > 0
	})
	waitFor(t, "one connection", func() bool { return settled(a, b2) })
	checkFlow(t, a, b2, 100)
	s := a.Stats()
	if s.Reconnects == 0 {
		t.Fatalf("A counted no reconnection: %+v", s)
	}
	if ps := a.Peers(); len(ps) != 1 || ps[0].Connects < 2 {
		t.Fatalf("A's peers %+v: want the same peer, connected twice", ps)
	}
}

// rawPeer is a hand-made peer: a TCP connection to n on which it has sent
// a hello with link ID id and addresses addrs, and read n's hello.
func rawPeer(t *testing.T, n *node, id [16]byte, addrs ...netip.Addr) net.Conn {
	t.Helper()
	c := dialRaw(t, n)
	h := hello{id: id, nonce: 7}
	for _, a := range addrs {
		h.gids = append(h.gids, a.As16())
	}
	if _, err := c.Write(appendHello(nil, &h)); err != nil {
		t.Fatal(err)
	}
	readHelloOf(t, c, n)
	return c
}

func dialRaw(t *testing.T, n *node) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", n.ListenAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readHelloOf reads n's hello from c and checks it.
func readHelloOf(t *testing.T, c net.Conn, n *node) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(testTimeout))
	b := make([]byte, helloFixedLen+16*len(n.gids))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	var h hello
	k, err := parseHelloFixed(b, &h)
	if err != nil || k != len(n.gids) || h.id != n.id {
		t.Fatalf("hello %x: %d GIDs, %v", b, k, err)
	}
	_ = c.SetReadDeadline(time.Time{})
}

func randomID() (id [16]byte) {
	_, _ = rand.Read(id[:])
	return id
}

// expectClosed waits until the link has closed c.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(testTimeout))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, net.ErrClosed) || isTimeout(err) {
		t.Fatalf("the link did not close the connection: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A peer that crashed without closing its connection connects again as a
// new link (new link ID, same addresses): its old connection is retired
// and frames go to the new one.
func TestPeerCrashReconnect(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, nil)
	peerAddr := netip.MustParseAddr("127.0.0.9")
	old := rawPeer(t, a, randomID(), peerAddr)
	waitFor(t, "the first connection", func() bool { return a.Stats().Connects == 1 })
	fresh := rawPeer(t, a, randomID(), peerAddr)
	waitFor(t, "the second connection", func() bool { return a.Stats().Connects == 2 })
	expectClosed(t, old)

	send(t, a.Link, testFrame(addrA, peerAddr, 5, []byte("after the restart")))
	want := testFrame(addrA, peerAddr, 5, []byte("after the restart"))
	got := make([]byte, 4+len(want))
	_ = fresh.SetReadDeadline(time.Now().Add(testTimeout))
	if _, err := io.ReadFull(fresh, got); err != nil {
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint32(got); n != uint32(len(want)) || string(got[4:]) != string(want) {
		t.Fatalf("the new connection got % x, want the frame % x", got, want)
	}
	if ps := a.Peers(); len(ps) != 1 || ps[0].Connects != 2 {
		t.Fatalf("A's peers %+v: want one, connected twice", ps)
	}
}
