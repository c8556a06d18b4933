package tcplink

import (
	"bytes"
	"net"
	"testing"
)

// silentListener accepts connections and never answers, so a link that
// dials it waits in its handshake with its frames queued. It stops when
// the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return ln.Addr().String()
}

// A frame that does not fit the peer's send queue is dropped and counted,
// the frames before and after it that fit are queued.
func TestQueueFull(t *testing.T) {
	var eps endpoints
	eps.set(addrC, silentListener(t))
	a := openNode(t, &eps, addrA, 0, func(c *Config) { c.QueueBytes = frameHeaderLen + MaxFrame })
	big := testFrame(addrA, addrC, 1, bytes.Repeat([]byte{1}, 4000))
	small := testFrame(addrA, addrC, 2, nil)
	n, err := a.WriteBatch([][]byte{big, big, big, small})
	if err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); n != 3 || s.DroppedQueueFull != 1 {
		t.Fatalf("queued %d, dropped %d as the queue was full; want 3 and 1", n, s.DroppedQueueFull)
	}
	waitFor(t, "the dial", func() bool { return a.Peers()[0].State == "connecting" })
	ps := a.Peers()
	if want := 2*(4+len(big)) + 4 + len(small); len(ps) != 1 || ps[0].Queued != want {
		t.Fatalf("peers %+v, want one with %d bytes queued", ps, want)
	}
}

// A peer that refuses connections: the link drops what it queued for it,
// counts the failed dials and backs off; the peer's state says why.
func TestUnreachablePeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	var eps endpoints
	eps.set(addrC, refused)
	a := openNode(t, &eps, addrA, 0, nil)
	for i := range 3 {
		send(t, a.Link, testFrame(addrA, addrC, uint32(i), nil))
		waitFor(t, "the frame to be dropped", func() bool { return a.Stats().DroppedNoPeer == uint64(i+1) })
	}
	s := a.Stats()
	ps := a.Peers()
	if s.DialErrors != 3 || len(ps) != 1 || ps[0].LastError == nil || ps[0].Endpoint != refused {
		t.Fatalf("stats %+v, peers %+v", s, ps)
	}
	t.Logf("%s since %v: %v", ps[0].State, ps[0].Since, ps[0].LastError)
}
