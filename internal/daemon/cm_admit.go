package daemon

// Who gets in on the connection manager's port. An inbound connection
// first needs a handshake slot (package admit: a few per source address,
// a bounded number in all, the oldest cut when all are taken); then, within
// a deadline, TLS (Config.CMTLS, mutual when it has ClientCAs) and
// Config.CMAuthorize name the daemon at the other end or refuse it. An
// admitted connection is an inbound peer: at most CMLimits.PerSource from
// one address and CMLimits.Inbound in all — when full, the idlest inbound
// peer is closed rather than the newcomer refused — and one that carries
// no CM connection and sends nothing for CMLimits.IdleTimeout is closed.
// Outgoing connections run the same TLS and authorization, and must reach
// the identity Config.CMResolvePeer expects at the endpoint. Every
// refusal is counted (Daemon.CMStats) and logged, a few lines at a time.

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

// Defaults of CMLimits.
const (
	DefaultCMIdleTimeout = 30 * time.Second
	DefaultCMPerSource   = 8
	DefaultCMInbound     = cmMaxPeers
)

// CMLimits bound what other hosts may hold of the connection manager's
// listener. Zero fields take the defaults.
type CMLimits struct {
	// Handshakes bounds the inbound connections in their handshake (TLS
	// and CMAuthorize): per source address, and in all, the oldest cut
	// when all are taken. Zero fields: 4 per source, 64 in all.
	Handshakes admit.Limits
	// HandshakeTimeout bounds the handshake, and the reading of a frame
	// once its first byte came. 0: 5 s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes an inbound connection that carries no CM
	// connection (in progress or established) and sends nothing for this
	// long. 0: DefaultCMIdleTimeout.
	IdleTimeout time.Duration
	// PerSource bounds the inbound connections from one address (a daemon
	// needs one); at the limit, that address's idlest is closed for the
	// new one. 0: DefaultCMPerSource.
	PerSource int
	// Inbound bounds the inbound connections in all; at the limit, the
	// idlest is closed for the new one. 0: DefaultCMInbound.
	Inbound int
}

func (l *CMLimits) check() error {
	if l.HandshakeTimeout < 0 || l.IdleTimeout < 0 || l.PerSource < 0 || l.Inbound < 0 {
		return fmt.Errorf("daemon: connection manager: negative CMLimits %+v: give positive ones, or 0 for the defaults", *l)
	}
	if err := l.Handshakes.Check(); err != nil {
		return fmt.Errorf("daemon: connection manager: %w", err)
	}
	if l.HandshakeTimeout == 0 {
		l.HandshakeTimeout = admit.DefaultHandshakeTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultCMIdleTimeout
	}
	if l.PerSource == 0 {
		l.PerSource = DefaultCMPerSource
	}
	if l.Inbound == 0 {
		l.Inbound = DefaultCMInbound
	}
	return nil
}

// CMStats are the connection manager listener's counters since the daemon
// started.
type CMStats struct {
	Inbound  int    // inbound connections open now
	Accepted uint64 // inbound connections admitted: handshake done, authorized
	// HandshakesRefused: inbound connections closed at once, their
	// source having CMLimits.Handshakes.PerSource in their handshake.
	HandshakesRefused uint64
	// HandshakesCut: inbound connections cut in their handshake to admit
	// a newer one.
	HandshakesCut uint64
	// HandshakeErrors: inbound connections whose TLS handshake failed or
	// did not finish in time.
	HandshakeErrors uint64
	// Unauthorized: connections, either way, CMAuthorize refused.
	Unauthorized uint64
	// WrongPeer: outgoing connections whose peer was not the identity
	// CMResolvePeer expected at the endpoint.
	WrongPeer uint64
	// IdleClosed: inbound connections closed after CMLimits.IdleTimeout
	// without a CM connection or a message.
	IdleClosed uint64
	// Evicted: inbound connections closed to make room for a new one
	// (CMLimits.PerSource or Inbound reached).
	Evicted uint64
	// LogsSuppressed: log lines about refused or closed connections left
	// out because too many came at once.
	LogsSuppressed uint64
}

// Errors of the connection manager's admission; match them with
// errors.Is.
var (
	// ErrCMUnauthorized: CMAuthorize refused a connection, or the peer was
	// not the identity expected at the endpoint.
	ErrCMUnauthorized = errors.New("daemon: connection manager peer not authorized")
	// ErrCMIdle: an inbound connection carried nothing for IdleTimeout.
	ErrCMIdle = errors.New("daemon: connection manager connection idle")
	// ErrCMEvicted: an inbound connection was closed to make room.
	ErrCMEvicted = errors.New("daemon: connection manager connection closed to make room")
)

// CMAuthError says why a CM connection was refused after its handshake.
type CMAuthError struct {
	Remote   string
	Outgoing bool
	Want     string // outgoing: the identity expected at the endpoint, if that was the reason
	Got      string
	Err      error // CMAuthorize's, if it refused
}

// Error is short: it ends up in a CM event's text (at most 128 bytes,
// after the peer's address), so it leads with the reason.
func (e *CMAuthError) Error() string {
	switch {
	case e.Err != nil:
		return fmt.Sprintf("refused: %v", e.Err)
	case e.Want != "":
		return fmt.Sprintf("it answered as %q, not %q: refused (a host record pointing at another daemon?)", e.Got, e.Want)
	case e.Outgoing:
		return "refused: CMResolvePeer named no identity for it (it must, with CMAuthorize)"
	}
	return "refused: CMAuthorize named no identity for it"
}

// Is makes a *CMAuthError match ErrCMUnauthorized.
func (e *CMAuthError) Is(target error) bool { return target == ErrCMUnauthorized }

// Unwrap returns CMAuthorize's error.
func (e *CMAuthError) Unwrap() error { return e.Err }

// cmIdleError closes an inbound connection that carried nothing.
type cmIdleError struct{ idle time.Duration }

func (e *cmIdleError) Error() string {
	return fmt.Sprintf("no CM connection and no message for %v: closed (the peer opens another when it needs one)", e.idle)
}

func (e *cmIdleError) Is(target error) bool { return target == ErrCMIdle }

// cmEvictedError closes the idlest inbound connection for a new one.
type cmEvictedError struct{ why string }

func (e *cmEvictedError) Error() string {
	return fmt.Sprintf("closed to make room for a new connection: %s, and this one was the idlest", e.why)
}

func (e *cmEvictedError) Is(target error) bool { return target == ErrCMEvicted }

// cmAdmission is the connection manager's part of admission control.
type cmAdmission struct {
	lim       CMLimits
	gate      *admit.Gate
	srvTLS    *tls.Config
	cliTLS    *tls.Config
	authorize admit.Authorizer
	log       admit.LogLimit
	hs        map[net.Conn]struct{} // inbound connections in their handshake; under m.mu

	accepted, hsErrors, unauthorized, wrongPeer, idleClosed, evicted atomic.Uint64
}

func newCMAdmission(cfg *Config) (*cmAdmission, error) {
	a := &cmAdmission{lim: cfg.CMLimits, srvTLS: admit.ServerTLS(cfg.CMTLS), cliTLS: cfg.CMTLS, authorize: cfg.CMAuthorize,
		hs: map[net.Conn]struct{}{}}
	if err := a.lim.check(); err != nil {
		return nil, err
	}
	a.gate = admit.NewGate(a.lim.Handshakes)
	return a, nil
}

// CMStats returns the connection manager listener's counters.
func (d *Daemon) CMStats() CMStats {
	m := d.cm
	if m == nil {
		return CMStats{}
	}
	a := m.adm
	g := a.gate.Stats()
	m.mu.Lock()
	n := len(m.inbound)
	m.mu.Unlock()
	return CMStats{Inbound: n, Accepted: a.accepted.Load(), HandshakesRefused: g.Refused, HandshakesCut: g.Cut,
		HandshakeErrors: a.hsErrors.Load(), Unauthorized: a.unauthorized.Load(), WrongPeer: a.wrongPeer.Load(),
		IdleClosed: a.idleClosed.Load(), Evicted: a.evicted.Load(), LogsSuppressed: a.log.Suppressed()}
}

// refused logs a refusal, a few lines at a time.
func (m *cmManager) refused(msg string, args ...any) {
	m.adm.log.Log(m.log, slog.LevelWarn, msg, args...)
}

// admitInbound starts the handshake of a connection the listener
// accepted, if the gate lets it in.
func (m *cmManager) admitInbound(c net.Conn) {
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

// handshakeInbound runs TLS and CMAuthorize on an inbound connection
// within the handshake deadline, then makes it an inbound peer.
func (m *cmManager) handshakeInbound(c net.Conn, slot *admit.Slot, src netip.Addr) {
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
func (m *cmManager) countRefusal(err error) {
	var ae *CMAuthError
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

// secure runs TLS (if configured) and CMAuthorize (if set) on c within
// the handshake deadline (or until ctx ends), and returns the connection to
// use (c, or TLS over it) and the peer's identity. An outgoing connection must reach
// expect, the identity CMResolvePeer named for endpoint.
func (m *cmManager) secure(ctx context.Context, c net.Conn, outgoing bool, endpoint, expect string) (net.Conn, string, error) {
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
		return nil, "", &CMAuthError{Remote: endpoint, Outgoing: true}
	}
	remote := c.RemoteAddr().String()
	if outgoing {
		remote = endpoint
	}
	id, err := a.authorize(admit.Peer{Remote: admit.AddrPortOf(c.RemoteAddr()), Outgoing: outgoing, Endpoint: endpoint,
		Expected: expect, Chain: chain})
	switch {
	case err != nil:
		return nil, "", &CMAuthError{Remote: remote, Outgoing: outgoing, Err: err}
	case id == "":
		return nil, "", &CMAuthError{Remote: remote, Outgoing: outgoing}
	case outgoing && id != expect:
		return nil, "", &CMAuthError{Remote: remote, Outgoing: true, Want: expect, Got: id}
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
func (m *cmManager) startInbound(raw, nc net.Conn, src netip.Addr, ident string) {
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
	p := newCMPeer(m, "from "+raw.RemoteAddr().String(), "")
	p.conn, p.inbound, p.src, p.ident = raw, true, src, ident
	p.lastActive.Store(time.Now().UnixNano())
	m.inbound[p] = struct{}{}
	m.wg.Add(2)
	m.mu.Unlock()
	m.adm.accepted.Add(1)
	if victim != nil {
		m.adm.evicted.Add(1)
		err := &cmEvictedError{why: why}
		m.refused("connection manager: closed an inbound connection", "peer", victim.name, "err", err)
		victim.fail(err)
	}
	go p.readLoop(nc)
	go p.writeLoop(nc)
}

// victimLocked returns the inbound peer to close to make room for one
// from src, and why, or nil if there is room. m.mu is held.
func (m *cmManager) victimLocked(src netip.Addr) (*cmPeer, string) {
	n := 0
	for p := range m.inbound {
		if p.src == src {
			n++
		}
	}
	lim := m.adm.lim
	switch {
	case n >= lim.PerSource:
		return m.idlestLocked(func(p *cmPeer) bool { return p.src == src }),
			fmt.Sprintf("%v has %d inbound connections, the most one address may", src, n)
	case len(m.inbound) >= lim.Inbound:
		return m.idlestLocked(func(*cmPeer) bool { return true }),
			fmt.Sprintf("%d inbound connections are open, the most there may be", len(m.inbound))
	}
	return nil, ""
}

// idlestLocked returns the inbound peer, among those of, to close first:
// one that carries no CM connection before one that does; among those,
// one that never sent a message (an idle connection, like those of a
// flood) before one that did, then the one idle the longest (nothing
// received or sent). m.mu is held.
func (m *cmManager) idlestLocked(of func(*cmPeer) bool) *cmPeer {
	busy := map[*cmPeer]bool{}
	for _, c := range m.conns {
		if c.peer != nil {
			busy[c.peer] = true
		}
	}
	rank := func(p *cmPeer) int { // lower goes first
		r := 0
		if busy[p] {
			r += 2
		}
		if p.spoke.Load() {
			r++
		}
		return r
	}
	var best *cmPeer
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
func (m *cmManager) carriesConns(p *cmPeer) bool {
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
func (m *cmManager) closeHandshakesLocked() {
	for c := range m.adm.hs {
		c.Close()
	}
}

// cmResolvePeer is the resolver the manager uses: Config.CMResolvePeer,
// or Config.CMResolve (DefaultCMResolve if nil), which names no identity.
func cmResolvePeer(cfg *Config) func(netip.Addr) (admit.Endpoint, error) {
	if cfg.CMResolvePeer != nil {
		return cfg.CMResolvePeer
	}
	r := cfg.CMResolve
	if r == nil {
		r = DefaultCMResolve
	}
	return func(a netip.Addr) (admit.Endpoint, error) {
		ep, err := r(a)
		return admit.Endpoint{Addr: ep}, err
	}
}
