package admit

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Limits and of the handshake deadline the listeners use.
const (
	DefaultPerSource        = 4
	DefaultTotal            = 64
	DefaultHandshakeTimeout = 5 * time.Second
)

// Limits bound the handshakes a Gate lets in at once.
type Limits struct {
	// PerSource is how many handshakes one source address may have in
	// flight; its next is refused. 0: DefaultPerSource.
	PerSource int
	// Total is how many handshakes may be in flight in all; at the limit
	// the oldest is cut to admit the new one. 0: DefaultTotal.
	Total int
}

// check fills in the defaults and refuses negative limits.
func (l *Limits) check() error {
	if l.PerSource == 0 {
		l.PerSource = DefaultPerSource
	}
	if l.Total == 0 {
		l.Total = DefaultTotal
	}
	if l.PerSource < 0 || l.Total < 0 {
		return fmt.Errorf("admit: negative handshake limits (%d per source, %d in all): give positive ones, or 0 for the defaults (%d, %d)",
			l.PerSource, l.Total, DefaultPerSource, DefaultTotal)
	}
	return nil
}

// Check validates l: negative limits are an error. Zero fields mean the
// defaults.
func (l Limits) Check() error { return l.check() }

// Gate bounds the connections in their handshake. Its methods are safe for
// concurrent use.
type Gate struct {
	lim Limits

	mu         sync.Mutex
	bySrc      map[netip.Addr]int
	head, tail *Slot // in flight, oldest first
	n          int

	admitted, refused, cut atomic.Uint64
}

// Slot is one handshake a Gate let in. Leave it when the handshake ends,
// whichever way.
type Slot struct {
	g          *Gate
	src        netip.Addr
	cutFn      func()
	prev, next *Slot
	in         bool // still counted by the gate; under g.mu
	wasCut     atomic.Bool
	progressed atomic.Bool // something came: cut after those that got nothing
}

// GateStats are a Gate's counters.
type GateStats struct {
	Admitted uint64 // handshakes let in
	Refused  uint64 // refused: their source had PerSource in flight
	Cut      uint64 // cut to make room for a newer one: Total were in flight
	InFlight int    // in flight now
}

// NewGate returns a gate with limits l (zero fields: the defaults; a
// negative one counts as the default too: validate with Limits.Check).
func NewGate(l Limits) *Gate {
	if l.check() != nil {
		l = Limits{PerSource: DefaultPerSource, Total: DefaultTotal}
	}
	return &Gate{lim: l, bySrc: make(map[netip.Addr]int)}
}

// Limits returns the gate's limits, defaults filled in.
func (g *Gate) Limits() Limits { return g.lim }

// Enter lets in a handshake from src, or refuses it with a
// *SourceFullError if src has PerSource handshakes in flight. cut must
// abort the handshake (close its connection): the gate calls it, on the
// goroutine of a later Enter and without its lock, when Total handshakes
// are in flight and this one is the one to go: the oldest of those that
// have received nothing yet (Slot.Progress), else the oldest. The slot is
// then no longer counted; Slot.Cut tells the handshake why it failed.
func (g *Gate) Enter(src netip.Addr, cut func()) (*Slot, error) {
	src = src.Unmap().WithZone("")
	g.mu.Lock()
	if k := g.bySrc[src]; k >= g.lim.PerSource {
		g.mu.Unlock()
		g.refused.Add(1)
		return nil, &SourceFullError{Source: src, Limit: g.lim.PerSource}
	}
	var victim *Slot
	if g.n >= g.lim.Total {
		victim = g.head
		for v := g.head; v != nil; v = v.next {
			if !v.progressed.Load() {
				victim = v
				break
			}
		}
		g.removeLocked(victim)
		victim.wasCut.Store(true)
	}
	s := &Slot{g: g, src: src, cutFn: cut, in: true, prev: g.tail}
	if g.tail != nil {
		g.tail.next = s
	} else {
		g.head = s
	}
	g.tail = s
	g.n++
	g.bySrc[src]++
	g.mu.Unlock()
	g.admitted.Add(1)
	if victim != nil {
		g.cut.Add(1)
		if victim.cutFn != nil {
			victim.cutFn()
		}
	}
	return s, nil
}

// removeLocked takes s out of the gate; g.mu is held.
func (g *Gate) removeLocked(s *Slot) {
	if !s.in {
		return
	}
	s.in = false
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		g.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		g.tail = s.prev
	}
	s.prev, s.next = nil, nil
	g.n--
	if k := g.bySrc[s.src] - 1; k > 0 {
		g.bySrc[s.src] = k
	} else {
		delete(g.bySrc, s.src)
	}
}

// Leave ends the handshake's stay in the gate. It may be called more than
// once, and after the gate cut the slot.
func (s *Slot) Leave() {
	s.g.mu.Lock()
	s.g.removeLocked(s)
	s.g.mu.Unlock()
}

// Progress records that the handshake has received something: a peer
// that is handshaking, not an idle connection. The gate cuts those that
// received nothing first. WatchConn calls it on the first bytes read.
func (s *Slot) Progress() { s.progressed.Store(true) }

// WatchConn returns c, reading through which calls s.Progress when bytes
// come. Use it for the handshake's reads.
func WatchConn(c net.Conn, s *Slot) net.Conn { return &watchedConn{Conn: c, s: s} }

type watchedConn struct {
	net.Conn
	s *Slot
}

// Unwrap returns the connection WatchConn was given.
func (c *watchedConn) Unwrap() net.Conn { return c.Conn }

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.s.Progress()
	}
	return n, err
}

// Cut reports whether the gate cut the handshake to make room for a newer
// one.
func (s *Slot) Cut() bool { return s.wasCut.Load() }

// Stats returns the gate's counters.
func (g *Gate) Stats() GateStats {
	g.mu.Lock()
	n := g.n
	g.mu.Unlock()
	return GateStats{Admitted: g.admitted.Load(), Refused: g.refused.Load(), Cut: g.cut.Load(), InFlight: n}
}

// SourceOf is the source address of a connection's remote address (a
// *net.TCPAddr, or anything whose String is host:port), unmapped and
// without a zone; the zero Addr if it has none.
func SourceOf(a net.Addr) netip.Addr {
	return AddrPortOf(a).Addr()
}

// AddrPortOf is a connection's remote address as a netip.AddrPort, the
// address unmapped and without a zone.
func AddrPortOf(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch v := a.(type) {
	case *net.TCPAddr:
		ap = v.AddrPort()
	case nil:
		return ap
	default:
		ap, _ = netip.ParseAddrPort(a.String())
	}
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
}

// Err is a *CutError if the gate cut the handshake, else nil.
func (s *Slot) Err() error {
	if !s.Cut() {
		return nil
	}
	return &CutError{Source: s.src, Limit: s.g.lim.Total}
}
