package connmgr

// Who gets in on the connection manager's port. An inbound connection
// first needs a handshake slot (package admit: a few per source address,
// a bounded number in all, the oldest cut when all are taken); then, within
// a deadline, TLS (Config.TLS, mutual when it has ClientCAs) and
// Config.Authorize name the daemon at the other end or refuse it. An
// admitted connection is an inbound peer: at most Limits.PerSource from
// one address and Limits.Inbound in all — when full, the idlest inbound
// peer is closed rather than the newcomer refused — and one that carries
// no CM connection and sends nothing for Limits.IdleTimeout is closed.
// Outgoing connections run the same TLS and authorization, and must reach
// the identity Config.Resolve expects at the endpoint. Every refusal is
// counted (Manager.Stats) and logged, a few lines at a time.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
)

// admission is the connection manager's part of admission control.
type admission struct {
	lim       Limits
	gate      *admit.Gate
	srvTLS    *tls.Config
	cliTLS    *tls.Config
	authorize admit.Authorizer
	log       admit.LogLimit
	hs        map[net.Conn]struct{} // inbound connections in their handshake; under m.mu

	accepted, hsErrors, unauthorized, wrongPeer, idleClosed, evicted atomic.Uint64
	// Requests refused: from a source their sender does not own; for a
	// listener whose session is not reading its events; at the limit of
	// the listener's owner.
	wrongSource, lagging, overLimit atomic.Uint64
	// MADs dropped: requests from outside the switch for a listener
	// that is not a native endpoint (refuseOutsider).
	outsiders atomic.Uint64
}

func newAdmission(cfg *Config) (*admission, error) {
	a := &admission{lim: cfg.Limits, srvTLS: admit.ServerTLS(cfg.TLS), cliTLS: cfg.TLS, authorize: cfg.Authorize,
		hs: map[net.Conn]struct{}{}}
	if err := a.lim.check(); err != nil {
		return nil, err
	}
	a.gate = admit.NewGate(a.lim.Handshakes)
	return a, nil
}

// refused logs a refusal, a few lines at a time.
func (m *Manager) refused(msg string, args ...any) {
	m.adm.log.Log(m.log, slog.LevelWarn, msg, args...)
}

// admitInbound starts the handshake of a connection the listener
// accepted, if the gate lets it in.
func (m *Manager) admitInbound(c net.Conn) {
	src := admit.SourceOf(c.RemoteAddr())
	slot, err := m.adm.gate.Enter(src, func() { c.Close() })
	if err != nil {
		m.refused("connection manager: connection refused before its handshake", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		slot.Leave()
		c.Close()
		return
	}
	m.adm.hs[c] = struct{}{}
	m.wg.Add(1)
	m.mu.Unlock()
	go m.handshakeInbound(c, slot, src)
}

// handshakeInbound runs TLS and Config.Authorize on an inbound connection
// within the handshake deadline, then makes it an inbound peer.
func (m *Manager) handshakeInbound(c net.Conn, slot *admit.Slot, src netip.Addr) {
	defer m.wg.Done()
	remote := c.RemoteAddr().String()
	// The first bytes tell the gate this is a peer at work, not an idle
	// connection (cut those first).
	nc, ident, err := m.secure(context.Background(), admit.WatchConn(c, slot), false, "", "") // close ends it: closeHandshakesLocked
	slot.Leave()
	m.mu.Lock()
	delete(m.adm.hs, c)
	closed := m.closed
	m.mu.Unlock()
	if cut := slot.Err(); cut != nil {
		err = cut // the gate closed the connection, maybe just after its handshake
	}
	if err == nil && closed {
		err = net.ErrClosed
	}
	if err != nil {
		c.Close()
		if !closed {
			m.countRefusal(err)
			m.refused("connection manager: connection refused in its handshake", "remote", remote, "err", err)
		}
		return
	}
	m.startInbound(c, nc, src, ident)
}

// countRefusal counts a connection refused in its handshake.
func (m *Manager) countRefusal(err error) {
	var ae *AuthError
	switch {
	case errors.Is(err, admit.ErrCut): // the gate counted it
	case errors.As(err, &ae) && ae.Want != "":
		m.adm.wrongPeer.Add(1)
	case ae != nil:
		m.adm.unauthorized.Add(1)
	default:
		m.adm.hsErrors.Add(1)
	}
}

// secure runs TLS (if configured) and Config.Authorize (if set) on c
// within the handshake deadline (or until ctx ends), and returns the
// connection to use (c, or TLS over it) and the peer's identity. An
// outgoing connection must reach expect, the identity Config.Resolve named
// for endpoint.
func (m *Manager) secure(ctx context.Context, c net.Conn, outgoing bool, endpoint, expect string) (net.Conn, string, error) {
	a := m.adm
	_ = c.SetDeadline(time.Now().Add(a.lim.HandshakeTimeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	nc := c
	if w, ok := c.(interface{ Unwrap() net.Conn }); ok {
		nc = w.Unwrap() // plain TCP: read the connection itself after the handshake
	}
	var chain []*x509.Certificate
	if a.cliTLS != nil {
		var tc *tls.Conn
		if outgoing {
			name := "" // with an authorizer, the chain alone: it names the peer
			if a.authorize == nil {
				name = hostOrAll(endpoint)
			}
			tc = tls.Client(c, admit.ClientTLS(a.cliTLS, name, &chain))
		} else {
			tc = tls.Server(c, a.srvTLS)
		}
		if err := tc.HandshakeContext(ctx); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = fmt.Errorf("no TLS handshake within %v", a.lim.HandshakeTimeout)
			}
			return nil, "", fmt.Errorf("TLS handshake: %w (do both ends use TLS on the CM port, with certificates the other's CAs sign?)", err)
		}
		if !outgoing {
			chain = admit.PeerChain(tc.ConnectionState())
		}
		nc = tc
	}
	if a.authorize == nil {
		return nc, "", nil
	}
	if outgoing && expect == "" { // connect refuses it first
		return nil, "", &AuthError{Remote: endpoint, Outgoing: true}
	}
	remote := c.RemoteAddr().String()
	if outgoing {
		remote = endpoint
	}
	id, err := a.authorize(admit.Peer{Remote: admit.AddrPortOf(c.RemoteAddr()), Outgoing: outgoing, Endpoint: endpoint,
		Expected: expect, Chain: chain})
	switch {
	case err != nil:
		return nil, "", &AuthError{Remote: remote, Outgoing: outgoing, Err: err}
	case id == "":
		return nil, "", &AuthError{Remote: remote, Outgoing: outgoing}
	case outgoing && id != expect:
		return nil, "", &AuthError{Remote: remote, Outgoing: true, Want: expect, Got: id}
	}
	return nc, id, nil
}

// hostOrAll is the host of a host:port.
func hostOrAll(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}

// startInbound makes an admitted connection an inbound peer, closing the
// idlest inbound peer first if its source, or the listener, has as many
// as it may. The victim leaves the table in the same step the newcomer
// enters it, so that the bounds hold however many come at once.
func (m *Manager) startInbound(raw, nc net.Conn, src netip.Addr, ident string) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		raw.Close()
		return
	}
	victim, why := m.victimLocked(src)
	if victim != nil {
		delete(m.inbound, victim) // fail, below, does the rest
	}
	p := newPeer(m, "from "+raw.RemoteAddr().String(), "")
	p.conn, p.inbound, p.src, p.ident = raw, true, src, ident
	p.lastActive.Store(time.Now().UnixNano())
	m.inbound[p] = struct{}{}
	m.wg.Add(2)
	m.mu.Unlock()
	m.adm.accepted.Add(1)
	if victim != nil {
		m.adm.evicted.Add(1)
		err := &evictedError{why: why}
		m.refused("connection manager: closed an inbound connection", "peer", victim.name, "err", err)
		victim.fail(err)
	}
	go p.readLoop(nc)
	go p.writeLoop(nc)
}

// victimLocked returns the inbound peer to close to make room for one
// from src, and why, or nil if there is room. m.mu is held.
func (m *Manager) victimLocked(src netip.Addr) (*peer, string) {
	n := 0
	for p := range m.inbound {
		if p.src == src {
			n++
		}
	}
	lim := m.adm.lim
	switch {
	case n >= lim.PerSource:
		return m.idlestLocked(func(p *peer) bool { return p.src == src }),
			fmt.Sprintf("%v has %d inbound connections, the most one address may", src, n)
	case len(m.inbound) >= lim.Inbound:
		return m.idlestLocked(func(*peer) bool { return true }),
			fmt.Sprintf("%d inbound connections are open, the most there may be", len(m.inbound))
	}
	return nil, ""
}

// idlestLocked returns the inbound peer, among those of, to close first:
// one that carries no CM connection before one that does; among those,
// one that never sent a message (an idle connection, like those of a
// flood) before one that did, then the one idle the longest (nothing
// received or sent). m.mu is held.
func (m *Manager) idlestLocked(of func(*peer) bool) *peer {
	busy := map[*peer]bool{}
	for _, c := range m.conns {
		if c.peer != nil {
			busy[c.peer] = true
		}
	}
	rank := func(p *peer) int { // lower goes first
		r := 0
		if busy[p] {
			r += 2
		}
		if p.spoke.Load() {
			r++
		}
		return r
	}
	var best *peer
	for p := range m.inbound {
		if !of(p) {
			continue
		}
		if best == nil || rank(p) < rank(best) ||
			(rank(p) == rank(best) && p.lastActive.Load() < best.lastActive.Load()) {
			best = p
		}
	}
	return best
}

// carriesConns reports whether any CM connection goes through p.
func (m *Manager) carriesConns(p *peer) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.conns {
		if c.peer == p {
			return true
		}
	}
	return false
}

// closeHandshakesLocked closes the connections in their handshake (the
// daemon is stopping); m.mu is held.
func (m *Manager) closeHandshakesLocked() {
	for c := range m.adm.hs {
		c.Close()
	}
}
