package tcplink

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/pki/pkitest"
)

// members is a fake switch: host names, their addresses, and an
// Authorizer that names a connection's peer by its certificate (if any)
// or its remote address, and accepts only a member announcing its own
// addresses.
type members struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr // by name
	seen  []admit.Peer            // what the Authorizer was asked
}

var errNotMember = errors.New("not a member of the switch")

func (m *members) add(name string, addrs ...netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hosts == nil {
		m.hosts = map[string][]netip.Addr{}
	}
	m.hosts[name] = addrs
}

func (m *members) authorize(p admit.Peer) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, p)
	name := ""
	if p.Chain != nil {
		name = p.Chain[0].Subject.CommonName
	} else {
		for n, as := range m.hosts {
			if slices.Contains(as, p.Remote.Addr()) {
				name = n
			}
		}
	}
	as, ok := m.hosts[name]
	if !ok {
		return "", fmt.Errorf("%v (%s): %w", p.Remote, name, errNotMember)
	}
	for _, a := range p.Addrs {
		if !slices.Contains(as, a) {
			return "", fmt.Errorf("%s announces %v, which is not one of its addresses", name, a)
		}
	}
	return name, nil
}

func (m *members) asked() []admit.Peer {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.seen)
}

// With an Authorizer, a host that is no member is refused after its
// hello, counted and logged with the Authorizer's reason; a member that
// announces another member's address is refused too; members connect.
func TestAuthorize(t *testing.T) {
	var sw members
	sw.add("hosta", addrA)
	sw.add("hostb", addrB)
	sw.add("hostc", addrC, attacker)
	var eps endpoints
	auth := func(c *Config) { c.Authorize = sw.authorize }
	a := openNode(t, &eps, addrA, 0, auth)
	b := openNode(t, &eps, addrB, 0, auth)
	eps.setIdentity(addrA, "hosta")
	eps.setIdentity(addrB, "hostb")
	connectPair(t, a, b)
	checkFlow(t, a, b, 20)
	if ps := a.Peers(); len(ps) != 1 || ps[0].Identity != "hostb" {
		t.Fatalf("A's peers %+v", ps)
	}
	for _, p := range sw.asked() {
		if p.Outgoing && (p.Expected == "" || p.Endpoint == "") || len(p.Addrs) == 0 || p.Chain != nil {
			t.Fatalf("the Authorizer was asked %+v", p)
		}
	}

	stranger := netip.MustParseAddr("127.0.0.77")
	tests := []struct {
		name   string
		src    netip.Addr
		addrs  []netip.Addr
		reason error  // the logged error wraps it, if set
		says   string // the logged error says it
	}{
		{"not a member", stranger, []netip.Addr{stranger}, errNotMember, "not a member"},
		{"a member announcing another's address", attacker, []netip.Addr{addrC, addrB}, nil, "not one of its addresses"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := intrude(t, a, tt.src, randomID(), tt.addrs...)
			x.wasRefused(t)
			if n := a.Stats().Unauthorized; n != uint64(i+1) {
				t.Fatalf("Unauthorized = %d, want %d", n, i+1)
			}
			err := a.logs.find(ErrUnauthorized)
			var ue *UnauthorizedError
			if !errors.As(err, &ue) || (tt.reason != nil && !errors.Is(err, tt.reason)) {
				t.Fatalf("logged %v", err)
			}
			a.logs.mu.Lock()
			var said []string
			for _, r := range a.logs.recs {
				if r.err != nil && errors.Is(r.err, ErrUnauthorized) {
					said = append(said, r.err.Error())
				}
			}
			a.logs.mu.Unlock()
			if !strings.Contains(strings.Join(said, "\n"), tt.says) {
				t.Fatalf("logged %q, none says %q", said, tt.says)
			}
			t.Log(said[len(said)-1])
			checkFlow(t, a, b, 20)
		})
	}
	if ps := a.Peers(); len(ps) != 1 {
		t.Fatalf("A's peers %+v: the refused ones left a trace", ps)
	}
}

// A member that the Authorizer accepts still cannot take an address
// another member's live connection holds (two records that claim one
// address: the first one connected keeps it).
func TestAuthorizedButHeld(t *testing.T) {
	var eps endpoints
	extra := netip.MustParseAddr("198.51.100.2") // B's, announced, unknown to the resolver
	a := openNode(t, &eps, addrA, 0, func(c *Config) {
		c.Authorize = func(p admit.Peer) (string, error) { return "host " + p.Remote.Addr().String(), nil }
	})
	b := openNode(t, &eps, addrB, 0, func(c *Config) { c.Addrs = append(c.Addrs, extra) })
	eps.setIdentity(addrB, "host 127.0.0.2")
	connectPair(t, a, b)
	x := intrude(t, a, attacker, randomID(), attacker, extra)
	x.wasRefused(t)
	send(t, a.Link, testFrame(addrA, extra, 1, nil))
	waitFor(t, "the frame to B's other address", func() bool { return b.sink.count() == 1 })
	if s := a.Stats(); s.Unauthorized != 1 || x.frames.Load() != 0 {
		t.Fatalf("stats %+v, intruder got %d frames", s, x.frames.Load())
	}
	err := a.logs.find(ErrUnauthorized)
	if err == nil || !strings.Contains(err.Error(), `which peer "host 127.0.0.2" holds`) {
		t.Fatalf("logged %v", err)
	}
	t.Log(err)
}

// A hello that announces an address the resolver places at another host
// is refused, even while that host has no connection.
func TestAnnounceResolvedElsewhere(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, nil)
	b := openNode(t, &eps, addrB, 0, nil)
	x := intrude(t, a, attacker, randomID(), attacker, addrB)
	x.wasRefused(t)
	if s := a.Stats(); s.Unauthorized != 1 {
		t.Fatalf("stats %+v", s)
	}
	if err := a.logs.find(ErrUnauthorized); err == nil || !strings.Contains(err.Error(), "places at") {
		t.Fatalf("logged %v", err)
	} else {
		t.Log(err)
	}
	connectPair(t, a, b)
	checkFlow(t, a, b, 20)
}

// An outgoing connection that reaches another identity than the one the
// resolver expects at the endpoint (a record rewritten to point at another
// daemon) is refused before a frame goes out on it.
func TestWrongPeer(t *testing.T) {
	var sw members
	sw.add("hosta", addrA)
	sw.add("hostb", addrB)
	sw.add("hostc", addrC)
	var eps endpoints
	auth := func(c *Config) { c.Authorize = sw.authorize }
	a := openNode(t, &eps, addrA, 0, auth)
	b := openNode(t, &eps, addrB, 0, nil)
	eps.set(addrC, b.ListenAddr().String()) // C's record points at B
	eps.setIdentity(addrC, "hostc")
	for i := range 3 {
		send(t, a.Link, testFrame(addrA, addrC, uint32(i), []byte("for C only")))
		waitFor(t, "the refusal", func() bool { return a.Stats().WrongPeer == uint64(i+1) })
		waitFor(t, "the frame to be dropped", func() bool { return a.Stats().DroppedNoPeer == uint64(i+1) })
	}
	var wp *WrongPeerError
	if err := a.logs.find(ErrWrongPeer); !errors.As(err, &wp) || wp.Want != "hostc" || wp.Got != "hostb" {
		t.Fatalf("logged %v, want a *WrongPeerError (want hostc, got hostb)", err)
	} else {
		t.Log(err)
	}
	if n := b.sink.count(); n != 0 {
		t.Fatalf("B got %d frames meant for C", n)
	}
	if s := a.Stats(); s.Connects != 0 || s.FramesOut != 0 {
		t.Fatalf("A connected or sent: %+v", s)
	}
}

// With an Authorizer, the resolver must name the identity it expects.
func TestAuthorizeNeedsExpectedIdentity(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, func(c *Config) {
		c.Authorize = func(p admit.Peer) (string, error) { return "anyone", nil }
	})
	b := openNode(t, &eps, addrB, 0, nil)
	send(t, a.Link, testFrame(addrA, addrB, 1, nil))
	waitFor(t, "the frame to be dropped", func() bool { return a.Stats().DroppedNoPeer == 1 })
	ps := a.Peers()
	if len(ps) != 1 || !errors.Is(ps[0].LastError, ErrConfig) || b.Stats().Connects != 0 {
		t.Fatalf("peers %+v, B %+v", ps, b.Stats())
	}
	t.Log(ps[0].LastError)
}

// Mutual TLS with certificates that name hosts, not addresses: the dialler
// verifies the chain, the Authorizer names the peer from it, and the link
// checks it is the host expected at the endpoint.
func TestAuthorizeTLS(t *testing.T) {
	ca := pkitest.NewCA(t, "switch CA")
	hostTLS := func(name string) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, name, name)}, RootCAs: ca.Pool, ClientCAs: ca.Pool, MinVersion: tls.VersionTLS13}
	}
	tests := []struct {
		name   string
		certB  string // the name in B's certificate
		expect string // the identity A's resolver expects at B's endpoint
		ok     bool
	}{
		{"the expected host", "hostb", "hostb", true},
		{"another member's certificate at the endpoint", "hostc", "hostb", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sw members
			sw.add("hosta", addrA)
			sw.add("hostb", addrB)
			sw.add("hostc", addrB) // so that only the expectation tells them apart
			var eps endpoints
			a := openNode(t, &eps, addrA, 0, func(c *Config) { c.Authorize, c.TLS = sw.authorize, hostTLS("hosta") })
			b := openNode(t, &eps, addrB, 0, func(c *Config) { c.Authorize, c.TLS = sw.authorize, hostTLS(tt.certB) })
			eps.setIdentity(addrA, "hosta")
			eps.setIdentity(addrB, tt.expect)
			if tt.ok {
				connectPair(t, a, b)
				checkFlow(t, a, b, 50)
				for _, p := range sw.asked() {
					if len(p.Chain) != 2 {
						t.Fatalf("the Authorizer got a chain of %d certificates: %+v", len(p.Chain), p)
					}
				}
				if ps := a.Peers(); len(ps) != 1 || ps[0].Identity != "hostb" {
					t.Fatalf("A's peers %+v", ps)
				}
				return
			}
			send(t, a.Link, testFrame(addrA, addrB, 1, nil))
			waitFor(t, "the refusal", func() bool { return a.Stats().WrongPeer == 1 })
			if b.sink.count() != 0 {
				t.Fatal("B got the frame")
			}
			t.Log(a.logs.find(ErrWrongPeer))
		})
	}
}

// A link that knows MaxPeers peers, all connected, refuses a new identity;
// once one of them is idle, it is forgotten to make room.
func TestPeerLimit(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, func(c *Config) { c.MaxPeers = 2; c.PeerIdle = time.Hour })
	var xs []*intruder
	for i := range 2 {
		src := netip.AddrFrom4([4]byte{127, 0, 4, byte(i + 1)})
		xs = append(xs, intrude(t, a, src, randomID(), src))
	}
	waitFor(t, "two peers", func() bool { return a.Stats().Connects == 2 })
	third := netip.MustParseAddr("127.0.4.3")
	intrude(t, a, third, randomID(), third).wasRefused(t)
	var pl *PeerLimitError
	if s := a.Stats(); s.PeerLimit != 1 || !errors.As(a.logs.find(ErrPeerLimit), &pl) {
		t.Fatalf("stats %+v, logged %v", s, a.logs.find(ErrPeerLimit))
	}
	t.Log(pl)
	xs[0].c.Close()
	waitFor(t, "the first peer to go idle", func() bool {
		for _, p := range a.Peers() {
			if p.State == "idle" {
				return true
			}
		}
		return false
	})
	intrude(t, a, third, randomID(), third)
	waitFor(t, "the third peer", func() bool { return a.Stats().Connects == 3 })
	if s := a.Stats(); s.PeersForgotten != 1 || a.peerCount() != 2 {
		t.Fatalf("stats %+v, %d peers", s, a.peerCount())
	}
}
