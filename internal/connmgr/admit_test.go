package connmgr_test

// The listener against an attacker: idle connections by the thousand,
// hosts that are no members, an endpoint that answers as another host.
// Every source address is a loopback address of its own.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/pki/pkitest"
	"github.com/vrdma/vrdma/internal/proto"
)

// Idle connections from many hosts, opened again as soon as one is
// closed, and more of them than the listener keeps: a daemon still gets
// its requests answered. Without TLS they fill the inbound connections;
// with TLS they hold the handshake slots.
func TestCMSlowloris(t *testing.T) {
	const (
		sources = 60
		perSrc  = 3
		budget  = 100000 // the attacker's connections, in all: it must last until the request is through
	)
	ca := pkitest.NewCA(t, "switch CA")
	tests := []struct {
		name string
		tls  bool
	}{{"plain: inbound connections", false}, {"TLS: handshake slots", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, h := newManager(t, func(c *connmgr.Config) {
				c.Limits = connmgr.Limits{Inbound: 64, PerSource: 4, IdleTimeout: time.Minute, HandshakeTimeout: time.Minute}
				if tt.tls {
					c.TLS = ca.Mutual(t, "hosta", "hosta")
				}
			})
			s := listenSession(t, m, h, 7000, 16)
			events := s.events
			stop := make(chan struct{})
			var opened atomic.Int64
			var wg sync.WaitGroup
			for s := range sources {
				src := netip.AddrFrom4([4]byte{127, 0, 6, byte(1 + s)})
				for range perSrc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for opened.Add(1) <= budget {
							dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
							c, err := dl.Dial("tcp", m.Addr().String())
							if err != nil {
								continue
							}
							done := make(chan struct{})
							go func() { _, _ = io.Copy(io.Discard, c); close(done) }()
							select {
							case <-done:
								c.Close()
							case <-stop:
								c.Close()
								return
							}
						}
					}()
				}
			}
			t.Cleanup(func() { // also when the test fails
				select {
				case <-stop:
				default:
					close(stop)
				}
				wg.Wait()
			})
			waitFor(t, "the attack to be under way", func() bool { return opened.Load() >= sources*perSrc })
			time.Sleep(100 * time.Millisecond) // let the accepts catch up
			// A daemon dials and sends its request at once, as a daemon
			// does; a connection cut before its request was read is
			// dialled again, as the daemon's would be.
			start := time.Now()
			legit := netip.MustParseAddr("127.0.7.1")
			tries := 0
			var p *wirePeer
			for p == nil {
				if tries++; tries > 100 {
					t.Fatalf("no connection lasted in %d tries: %+v", tries, m.Stats())
				}
				q, err := dialCMFrom(t, m, legit)
				if err != nil {
					t.Fatal(err)
				}
				if tt.tls {
					tc := tls.Client(q.Conn, clientOf(t, ca, "hostb", "hosta"))
					if tc.Handshake() != nil {
						continue // cut in its handshake
					}
					q.Conn = tc
				}
				r := req(0x71, 7000, h.gid())
				r.PrivateData = []byte{byte(tries)} // tells this try's request from an earlier one's
				b, _ := r.Append(nil)
				if _, err := q.Conn.Write(b); err != nil {
					continue // cut before its request went
				}
				msgs, ended := watch(q.Conn)
				var ev proto.CMEvent
				select {
				case ev = <-events:
				case <-ended:
					continue
				case <-time.After(wait):
					t.Fatal("neither an event nor the end of the connection")
				}
				if ev.Type != proto.CMEventRequest || len(ev.PrivateData) != 1 || ev.PrivateData[0] != byte(tries) {
					continue // an earlier try's request, read before its connection was cut
				}
				{
					took := time.Since(start)
					// The request is in progress: the connection is kept
					// however many come, until the answer is read. (Unless
					// it was closed just before its request was run: the
					// requester then hears its connection was lost, and
					// tries again.)
					if err := s.do(func() error { return m.Reject(s, proto.CMRejectReq{ID: ev.ID, Text: "not today"}) }); err != nil {
						t.Fatal(err)
					}
					select {
					case m := <-msgs:
						if r, ok := m.(*cm.REJ); !ok || r.RemoteID != 0x71 || r.Text != "not today" {
							t.Fatalf("got %T %+v, want the session's REJ", m, m)
						}
					case <-ended:
						continue
					case <-time.After(wait):
						t.Fatal("no answer")
					}
					p = q
					t.Logf("the request got through after %v (%d tries), with %d idle connections opened so far", took, tries, opened.Load())
					if opened.Load() >= budget {
						t.Fatalf("the attack was over before the request got through: give the attacker more than %d connections", budget)
					}
				}
			}
			close(stop)
			wg.Wait()
			st := m.Stats()
			t.Logf("%d idle connections opened; %+v", opened.Load(), st)
			if st.Evicted+st.HandshakesCut == 0 {
				t.Fatalf("nothing was closed to make room: %+v", st)
			}
		})
	}
}

// An inbound connection that carries nothing is closed after the idle
// timeout; one that carries a request in progress is not, until the
// request is gone.
func TestCMIdleTimeout(t *testing.T) {
	m, h := newManager(t, func(c *connmgr.Config) { c.Limits.IdleTimeout = 100 * time.Millisecond })
	s := listenSession(t, m, h, 7000, 1)
	busy := dialCM(t, m)
	busy.Send(req(41, 7000, h.gid()))
	if ev := s.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v", ev)
	}
	idle := dialCM(t, m)
	waitFor(t, "the idle connection to be closed", func() bool { return m.Stats().IdleClosed == 1 })
	if !idle.Closed() {
		t.Fatal("the idle connection is open")
	}
	// More than the idle timeout has passed since busy's request, which
	// is still waiting: busy is open, and answers.
	answers(busy, 42)
	// The requester gives up; then busy carries nothing, and goes too.
	busy.Send(&cm.REJ{LocalID: 41, Reason: cm.RejectTimeout, Text: "gave up"})
	waitFor(t, "the second idle connection to be closed", func() bool { return m.Stats().IdleClosed == 2 })
	if !busy.Closed() {
		t.Fatal("the connection is open")
	}
}

// A source that has as many inbound connections as it may gets a new one
// by losing its idlest; a connection that carries a request in progress
// goes last.
func TestCMPerSource(t *testing.T) {
	m, h := newManager(t, func(c *connmgr.Config) { c.Limits.PerSource = 2 })
	s := listenSession(t, m, h, 7000, 1)
	src := netip.MustParseAddr("127.0.8.1")
	first, err := dialCMFrom(t, m, src)
	if err != nil {
		t.Fatal(err)
	}
	first.Send(req(51, 7000, h.gid())) // carries a request from now on
	if ev := s.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v", ev)
	}
	second, err := dialCMFrom(t, m, src)
	if err != nil {
		t.Fatal(err)
	}
	answers(second, 52)
	third, err := dialCMFrom(t, m, src)
	if err != nil {
		t.Fatal(err)
	}
	answers(third, 53)
	if !second.Closed() {
		t.Fatal("the idle connection is open")
	}
	answers(first, 54)
	if st := m.Stats(); st.Evicted != 1 || st.Inbound != 2 {
		t.Fatalf("stats %+v", st)
	}
	// Another source is not affected.
	other, err := dialCMFrom(t, m, netip.MustParseAddr("127.0.8.2"))
	if err != nil {
		t.Fatal(err)
	}
	answers(other, 55)
}

// Authorize refuses a host that is no member: its connection is closed
// before anything it sends is read, counted and logged; members are
// answered.
func TestCMAuthorizeInbound(t *testing.T) {
	member := netip.MustParseAddr("127.0.9.1")
	var asked []admit.Peer
	var mu sync.Mutex
	m, _ := newManager(t, func(c *connmgr.Config) {
		c.Authorize = func(p admit.Peer) (string, error) {
			mu.Lock()
			asked = append(asked, p)
			mu.Unlock()
			if p.Remote.Addr() != member {
				return "", fmt.Errorf("%v is no member of the switch", p.Remote.Addr())
			}
			return "hostb", nil
		}
	})
	stranger, err := dialCMFrom(t, m, netip.MustParseAddr("127.0.9.66"))
	if err != nil {
		t.Fatal(err)
	}
	stranger.Send(req(61, 7, otherGID))
	if !stranger.Closed() {
		t.Fatal("the stranger's connection is open")
	}
	p, err := dialCMFrom(t, m, member)
	if err != nil {
		t.Fatal(err)
	}
	answers(p, 62)
	if st := m.Stats(); st.Unauthorized != 1 || st.Accepted != 1 {
		t.Fatalf("stats %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0].Outgoing || asked[0].Chain != nil {
		t.Fatalf("Authorize was asked %+v", asked)
	}
}

// fakeCM is a listener that counts what it is sent and never answers.
func fakeCM(t *testing.T) (string, *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var got atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				got.Add(n)
			}()
		}
	}()
	return ln.Addr().String(), &got
}

// An outgoing CM connection that reaches another identity than the one
// the resolver expects (a record rewritten to point at another daemon) is
// refused before anything is sent on it; the request fails with the
// reason. With an authorizer, a resolver that names no identity fails the
// request at once.
func TestCMWrongPeer(t *testing.T) {
	ep, got := fakeCM(t)
	expect := "hostb"
	m, h := newManager(t, func(c *connmgr.Config) {
		c.Resolve = func(netip.Addr) (admit.Endpoint, error) { return admit.Endpoint{Addr: ep, Identity: expect}, nil }
		c.Authorize = func(p admit.Peer) (string, error) { return "mallory", nil }
	})
	s := connectSession(t, m, h, otherGID)
	ev := s.event()
	if ev.Type != proto.CMEventUnreachable || !strings.Contains(ev.Text, `answered as "mallory", not "hostb"`) {
		t.Fatalf("event %+v, want unreachable, with the reason", ev)
	}
	t.Log(ev.Text)
	if st := m.Stats(); st.WrongPeer != 1 {
		t.Fatalf("stats %+v", st)
	}

	expect = ""
	s = newSession(t, h.adapter)
	qp, _ := s.newQP(abi.QPTypeRC)
	err := s.do(func() error {
		_, err := m.Connect(s, proto.CMConnectReq{ID: 5, QP: qp, PSN: 1, Addr: otherGID[:], Port: 7})
		return err
	})
	if proto.CodeOf(err) != proto.CodeNotFound || !strings.Contains(err.Error(), "named no identity") {
		t.Fatalf("err = %v, want the request refused: the resolver named no identity", err)
	}
	time.Sleep(10 * time.Millisecond) // a REQ sent by mistake would have arrived by now
	if n := got.Load(); n != 0 {
		t.Fatalf("the endpoint got %d bytes", n)
	}
}

// clientOf is mutual TLS for host from ca, checking the server's
// certificate for the name server.
func clientOf(t *testing.T, ca *pkitest.CA, host, server string) *tls.Config {
	c := ca.Mutual(t, host, host)
	c.ServerName = server
	return c
}

// byCertificate is an Authorizer for the members named: the peer is the
// host its certificate names.
func byCertificate(members ...string) admit.Authorizer {
	return func(p admit.Peer) (string, error) {
		if len(p.Chain) == 0 {
			return "", errors.New("no certificate")
		}
		name := p.Chain[0].Subject.CommonName
		for _, m := range members {
			if m == name {
				return name, nil
			}
		}
		return "", fmt.Errorf("%q is no member of the switch", name)
	}
}

// Two daemons with mutual TLS on the CM port and certificates that name
// hosts: a request goes through and is answered; a plain client, and a
// certificate holder that is no member, are refused; an endpoint whose
// certificate names another host than the one expected gets nothing.
func TestCMTLS(t *testing.T) {
	ca := pkitest.NewCA(t, "switch CA")
	b, _ := newManager(t, func(c *connmgr.Config) {
		c.TLS, c.Authorize = ca.Mutual(t, "hostb", "hostb"), byCertificate("hosta", "hostb")
	})
	newA := func(expect string) (*connmgr.Manager, *testHost) {
		return newManager(t, func(c *connmgr.Config) {
			c.TLS, c.Authorize = ca.Mutual(t, "hosta", "hosta"), byCertificate("hosta", "hostb", "hostc")
			c.Resolve = func(netip.Addr) (admit.Endpoint, error) {
				return admit.Endpoint{Addr: b.Addr().String(), Identity: expect}, nil
			}
		})
	}
	t.Run("members", func(t *testing.T) {
		a, h := newA("hostb")
		s := connectSession(t, a, h, otherGID)
		if ev := s.event(); ev.Type != proto.CMEventRejected || ev.Reason != uint16(cm.RejectInvalidServiceID) {
			t.Fatalf("event %+v, want B's answer", ev)
		}
	})
	t.Run("another host at the endpoint", func(t *testing.T) {
		a, h := newA("hostc")
		s := connectSession(t, a, h, otherGID)
		if ev := s.event(); ev.Type != proto.CMEventUnreachable || !strings.Contains(ev.Text, `answered as "hostb", not "hostc"`) {
			t.Fatalf("event %+v", ev)
		}
		if st := a.Stats(); st.WrongPeer != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("plain client", func(t *testing.T) {
		before := b.Stats().HandshakeErrors
		p := dialCM(t, b)
		p.Send(req(71, 7, otherGID))
		if !p.Closed() {
			t.Fatal("open")
		}
		waitFor(t, "the count", func() bool { return b.Stats().HandshakeErrors == before+1 })
	})
	t.Run("no member", func(t *testing.T) {
		before := b.Stats().Unauthorized
		p := dialCM(t, b)
		tc := tls.Client(p.Conn, clientOf(t, ca, "mallory", "hostb"))
		p.Conn = tc
		if err := tc.Handshake(); err == nil {
			p.Send(req(72, 7, otherGID))
			if !p.Closed() {
				t.Fatal("open")
			}
		}
		waitFor(t, "the count", func() bool { return b.Stats().Unauthorized == before+1 })
	})
}

// A manager stops at once while a connection it dialled, or one dialled to
// it, is in its TLS handshake with a peer that says nothing.
func TestCMCloseDuringHandshake(t *testing.T) {
	ca := pkitest.NewCA(t, "switch CA")
	ep, _ := fakeCM(t)
	m, h := newManager(t, func(c *connmgr.Config) {
		c.TLS = ca.Mutual(t, "hosta", "hosta")
		c.Limits.HandshakeTimeout = time.Hour
		c.Resolve = connmgr.Resolver(func(netip.Addr) (string, error) { return ep, nil }).Endpoints()
	})
	connectSession(t, m, h, otherGID) // dials the silent endpoint
	dialCM(t, m)                      // says nothing in its handshake
	done := make(chan struct{})
	go func() { m.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Close waits for the handshakes")
	}
}
