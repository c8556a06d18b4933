// Package cmtest is a hand-made connection manager peer for tests: a TCP
// connection to a daemon's CM listener that sends and reads the messages
// of package cm frame by frame, so that a test can play a daemon that
// breaks the rules.
//
//	p := cmtest.Dial(t, m.Addr().String())
//	p.Send(&cm.REQ{LocalID: 1, ...})
//	p.ExpectREJ(1, cm.RejectInvalidServiceID, "no listener")
package cmtest

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/cm"
)

// Wait turns a hang into a failure; nothing depends on it.
const Wait = 5 * time.Second

// Peer is one connection to a CM listener.
type Peer struct {
	T    testing.TB
	Conn net.Conn // a test may wrap it (TLS) or half-close it
	buf  [cm.MaxFrame]byte
}

// Dial connects to the listener at addr; the connection closes when the
// test ends.
func Dial(t testing.TB, addr string) *Peer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &Peer{T: t, Conn: c}
}

// DialFrom connects to the listener at addr from the address src.
func DialFrom(t testing.TB, addr string, src netip.Addr) (*Peer, error) {
	t.Helper()
	dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: Wait}
	c, err := dl.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return &Peer{T: t, Conn: c}, nil
}

// Write writes raw bytes.
func (p *Peer) Write(b []byte) {
	p.T.Helper()
	if _, err := p.Conn.Write(b); err != nil {
		p.T.Fatal(err)
	}
}

// Send writes one message.
func (p *Peer) Send(m cm.Message) {
	p.T.Helper()
	b, err := m.Append(nil)
	if err != nil {
		p.T.Fatal(err)
	}
	p.Write(b)
}

// Recv reads one message; the test fails if none comes within Wait.
func (p *Peer) Recv() cm.Message {
	p.T.Helper()
	_ = p.Conn.SetReadDeadline(time.Now().Add(Wait))
	m, err := cm.ReadFrame(p.Conn, &p.buf)
	if err != nil {
		p.T.Fatalf("no message from the connection manager: %v", err)
	}
	return m
}

// ExpectREJ reads a REJ for the sender's connection id with reason and a
// text that has text.
func (p *Peer) ExpectREJ(id uint32, reason cm.Reason, text string) *cm.REJ {
	p.T.Helper()
	m := p.Recv()
	r, ok := m.(*cm.REJ)
	if !ok || r.RemoteID != id || r.Reason != reason || !strings.Contains(r.Text, text) {
		p.T.Fatalf("got %T %+v, want a REJ of %#x with %v and %q", m, m, id, reason, text)
	}
	return r
}

// Closed reports whether the listener's side closed the connection. What
// it sent before (the answer to a good frame ahead of garbage, say) is read
// and dropped.
func (p *Peer) Closed() bool {
	_ = p.Conn.SetReadDeadline(time.Now().Add(Wait))
	_, err := io.Copy(io.Discard, p.Conn)
	return err == nil || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset")
}
