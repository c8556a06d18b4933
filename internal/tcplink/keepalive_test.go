package tcplink

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"
)

// An idle connection carries keepalives both ways and stays up.
func TestKeepalive(t *testing.T) {
	var eps endpoints
	short := func(c *Config) { c.KeepAlive = 100 * time.Millisecond }
	a := openNode(t, &eps, addrA, 0, short)
	b := openNode(t, &eps, addrB, 0, short)
	connectPair(t, a, b)
	waitFor(t, "keepalives both ways", func() bool { return a.Stats().Pings >= 3 && b.Stats().Pings >= 3 })
	sa, sb := a.Stats(), b.Stats()
	if sa.Timeouts+sb.Timeouts != 0 || sa.Connects != 1 || sb.Connects != 1 || !settled(a, b) {
		t.Fatalf("the idle connection did not stay up: A %+v, B %+v", sa, sb)
	}
}

// A peer that says its hello, then nothing, not even keepalives, is
// declared dead after DeadAfter intervals, and its connection closed.
func TestSilentPeer(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, func(c *Config) { c.KeepAlive = 50 * time.Millisecond })
	c := rawPeer(t, a, randomID(), addrC)
	waitFor(t, "the peer to be declared dead", func() bool { return a.Stats().Timeouts == 1 })
	// Until then, the link sent keepalives; then it closed the connection.
	var hdr [4]byte
	_ = c.SetReadDeadline(time.Now().Add(testTimeout))
	if _, err := io.ReadFull(c, hdr[:]); err != nil || binary.BigEndian.Uint32(hdr[:]) != 0 {
		t.Fatalf("read % x, %v; want a keepalive", hdr, err)
	}
	expectClosed(t, c)
	var se *SilentError
	if err := a.logs.find(ErrSilent); !errors.As(err, &se) {
		t.Fatalf("logged %v, want a *SilentError", err)
	} else {
		t.Log(err)
	}
	if ps := a.Peers(); len(ps) != 1 || ps[0].State != "idle" || !errors.Is(ps[0].LastError, ErrSilent) {
		t.Fatalf("peers %+v", ps)
	}
}
