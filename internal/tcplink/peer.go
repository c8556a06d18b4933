package tcplink

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// peer is another daemon's link: its send queue, its connection and the
// goroutine (run, in writer.go) that writes the one into the other,
// dialling when there is none.
type peer struct {
	l    *Link
	wake chan struct{} // capacity 1: the writer has something to do

	// Under l.mu.
	endpoint  string       // what to dial; "" if unknown
	expect    string       // the identity expected at endpoint ("" none)
	ident     string       // its identity, from its first connection; "" before
	announced []netip.Addr // in its last hello, accepted
	resolved  []netip.Addr // resolved to it through Config.Peers

	// gone: the peer was forgotten: it is in no table, and its writer
	// ends. Set under l.mu and p.mu both, so either lock reads it.
	gone bool

	mu            sync.Mutex
	merged        *peer   // it turned out to be that peer: route there
	conn          *conn   // frames go out on it; nil while none
	toShut        []*conn // connections the writer must end its side of
	pending       []byte  // frames with their length prefixes, for the writer
	pendingFrames int
	// writing: the writer or a direct write (direct.go) is writing to the
	// connection; nobody else may start one.
	writing bool
	// headConn, if set, is the connection a direct write left a frame half
	// written on: the first headLen bytes of pending are its rest and go
	// on that connection only.
	headConn *conn
	headLen  int
	dspare   []byte // the direct writer's spare queue buffer
	state    string
	since    time.Time
	connects int
	lastErr  error
}

// epKey names a peer to dial: its endpoint and the identity expected
// there.
type epKey struct{ endpoint, expect string }

// newPeerLocked adds a peer and starts its writer; nil if the link is
// closed. l.mu is held.
func (l *Link) newPeerLocked(endpoint, expect string) *peer {
	p := &peer{l: l, wake: make(chan struct{}, 1), endpoint: endpoint, expect: expect, state: "idle", since: time.Now()}
	if !l.goRunLocked(p.run) {
		return nil
	}
	if endpoint != "" {
		l.byEP[epKey{endpoint, expect}] = p
	}
	l.peers = append(l.peers, p)
	return p
}

// signal wakes the peer's writer.
func (p *peer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// setState records a state change; p.mu is held.
func (p *peer) setState(s string) {
	if p.state != s {
		p.state, p.since = s, time.Now()
	}
}

// addrsLocked lists the addresses that route to p: announced, then
// resolved; l.mu is held.
func (p *peer) addrsLocked() []netip.Addr {
	out := slices.Clone(p.announced)
	for _, a := range p.resolved {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// nameLocked is how messages call p; l.mu is held.
func (p *peer) nameLocked() string {
	switch {
	case p.ident != "":
		return fmt.Sprintf("peer %q", p.ident)
	case p.endpoint != "":
		return "the peer at " + p.endpoint
	}
	return "another peer"
}

// stateLocked reports the peer; l.mu is held.
func (p *peer) stateLocked() PeerState {
	id := p.ident
	if id == "" {
		id = p.expect
	}
	s := PeerState{Identity: id, Endpoint: p.endpoint, Addrs: p.addrsLocked()}
	p.mu.Lock()
	defer p.mu.Unlock()
	s.State, s.Since, s.Queued, s.Connects, s.LastError = p.state, p.since, len(p.pending), p.connects, p.lastErr
	if c := p.conn; c != nil {
		s.Outgoing, s.Local, s.Remote = c.outgoing, c.raw.LocalAddr().String(), c.remote
	}
	return s
}

// liveLocked reports whether p is in use: it has a connection, is
// dialling, or has frames queued. l.mu is held.
func (p *peer) liveLocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conn != nil || p.state == "connecting" || len(p.pending) > 0 || p.writing
}

// attach gives a connection whose hello is done, and whose identity is
// known, to the peer of that identity: the peer it was dialled for
// (merged into the peer of its identity if the link knew that one by
// another endpoint), a peer that expects it, or a new one. Its hello's
// addresses then route to that peer; an address another live peer holds
// refuses the connection. If the peer has a connection already, one of
// the two goes: the older if the peer restarted (a new link ID), else the
// one the tie-break ranks second.
func (l *Link) attach(c *conn) error {
	var stale []*conn
	defer func() {
		for _, s := range stale {
			s.close(errRestarted)
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	var p *peer // the peer c was dialled for
	if c.outgoing {
		p = c.dialFor
		for p != nil && p.merged != nil {
			p = p.merged
		}
		if p != nil && p.gone {
			p = nil
		}
		if p != nil && p.ident != "" && p.ident != c.ident {
			return &WrongPeerError{Endpoint: c.endpoint, Want: p.ident, Got: c.ident}
		}
	}
	q := l.byIdent[c.ident]
	if q == nil && p == nil {
		q = l.expectingLocked(c.ident)
	}
	target := q
	if target == nil {
		target = p
	}
	for _, a := range c.addrs {
		x := l.byAddr[a]
		// A peer not connected yet that expects this identity is the same
		// host, reached through another endpoint: its addresses move.
		sameHost := x != nil && x.ident == "" && x.expect == c.ident
		if x != nil && x != target && x != p && !sameHost && x.liveLocked() {
			return &UnauthorizedError{Remote: c.remote, Identity: c.ident,
				Reason: fmt.Sprintf("its hello announces %v, which %s holds", a, x.nameLocked())}
		}
	}
	if target == nil {
		if len(l.peers) >= l.cfg.MaxPeers && !l.forgetOneIdleLocked() {
			return &PeerLimitError{Remote: c.remote, Identity: c.ident, Limit: l.cfg.MaxPeers}
		}
		if target = l.newPeerLocked("", ""); target == nil {
			return ErrClosed
		}
	}
	if p != nil && p != target {
		if s := l.mergeLocked(p, target); s != nil {
			stale = append(stale, s)
		}
	}
	if target.ident == "" {
		target.ident = c.ident
		l.byIdent[c.ident] = target
	}
	l.announceLocked(target, c.addrs)
	c.p = target

	target.mu.Lock()
	old := target.conn
	switch {
	case old == nil:
		target.conn = c
	case old.hello.id != c.hello.id: // the peer restarted: old is dead
		target.conn = c
		stale = append(stale, old)
	case l.ranksFirst(c, old):
		target.conn = c
		target.toShut = append(target.toShut, old)
		l.stats.duplicates.Add(1)
	default:
		target.toShut = append(target.toShut, c)
		l.stats.duplicates.Add(1)
	}
	target.setState("up")
	l.stats.connects.Add(1)
	if target.connects > 0 {
		l.stats.reconnects.Add(1)
	}
	target.connects++
	target.mu.Unlock()
	target.signal()
	l.churnLog.Log(l.log, slog.LevelInfo, "tcplink: connected", "remote", c.remote, "identity", c.ident, "outgoing", c.outgoing, "peer", c.addrs)
	return nil
}

// expectingLocked returns a peer not yet connected that expects identity
// id at its endpoint (the link is dialling it, say), or nil. l.mu is
// held.
func (l *Link) expectingLocked(id string) *peer {
	for _, p := range l.peers {
		if p.ident == "" && p.expect == id {
			return p
		}
	}
	return nil
}

// announceLocked makes the addresses of p's latest hello route to p: they
// leave the peer that had them, and what p announced before and no longer
// does stops routing to it (unless Config.Peers resolved it there). l.mu
// is held.
func (l *Link) announceLocked(p *peer, addrs []netip.Addr) {
	for _, a := range p.announced {
		if !slices.Contains(addrs, a) && !slices.Contains(p.resolved, a) && l.byAddr[a] == p {
			delete(l.byAddr, a)
		}
	}
	for _, a := range addrs {
		if x := l.byAddr[a]; x != nil && x != p {
			x.announced = slices.DeleteFunc(x.announced, func(b netip.Addr) bool { return b == a })
			x.resolved = slices.DeleteFunc(x.resolved, func(b netip.Addr) bool { return b == a })
		}
		l.byAddr[a] = p
	}
	p.announced = addrs
}

// errRestarted ends the connection of a peer that reconnected as a new
// link (it restarted).
var errRestarted = &restartedError{}

type restartedError struct{}

func (*restartedError) Error() string {
	return "tcplink: the peer connected again as a new link (it restarted): its old connection is closed"
}

// mergeLocked folds p, dialled for an endpoint, into q, the peer its
// connection showed it to be (reached earlier through another endpoint or
// address): p's addresses, endpoint and queued frames move to q, p's writer
// ends. It returns p's connection, if it had one, which is stale. l.mu is
// held.
func (l *Link) mergeLocked(p, q *peer) *conn {
	for _, a := range p.resolved {
		if l.byAddr[a] == p {
			l.byAddr[a] = q
		}
		if !slices.Contains(q.resolved, a) {
			q.resolved = append(q.resolved, a)
		}
	}
	if p.endpoint != "" {
		l.byEP[epKey{p.endpoint, p.expect}] = q
		if q.endpoint == "" {
			q.endpoint, q.expect = p.endpoint, p.expect
		}
	}
	l.peers = slices.DeleteFunc(l.peers, func(x *peer) bool { return x == p })
	p.mu.Lock()
	q.mu.Lock()
	p.dropHead()
	if len(q.pending)+len(p.pending) <= l.cfg.QueueBytes {
		q.pending = append(q.pending, p.pending...)
		q.pendingFrames += p.pendingFrames
	} else {
		l.stats.droppedQueueFull.Add(uint64(p.pendingFrames))
	}
	p.pending, p.pendingFrames = nil, 0
	p.merged = q
	stale := p.conn
	p.conn = nil
	q.mu.Unlock()
	p.mu.Unlock()
	p.signal()
	return stale
}

// forgetLocked takes p out of every table and ends its writer, if it has
// no connection and nothing queued or being written; false if it has.
// l.mu is held.
func (l *Link) forgetLocked(p *peer) bool {
	p.mu.Lock()
	busy := p.gone || p.conn != nil || len(p.pending) > 0 || p.writing || p.state == "connecting" || p.merged != nil
	if !busy {
		p.gone = true
		p.setState("gone")
	}
	p.mu.Unlock()
	if busy {
		return false
	}
	for _, a := range p.announced {
		if l.byAddr[a] == p {
			delete(l.byAddr, a)
		}
	}
	for _, a := range p.resolved {
		if l.byAddr[a] == p {
			delete(l.byAddr, a)
		}
	}
	for k, x := range l.byEP {
		if x == p {
			delete(l.byEP, k)
		}
	}
	if p.ident != "" && l.byIdent[p.ident] == p {
		delete(l.byIdent, p.ident)
	}
	l.peers = slices.DeleteFunc(l.peers, func(x *peer) bool { return x == p })
	l.stats.forgotten.Add(1)
	p.signal()
	return true
}

// forgetOneIdleLocked forgets the peer idle the longest, to make room for
// a new one; false if none is idle. l.mu is held.
func (l *Link) forgetOneIdleLocked() bool {
	var idlest *peer
	var since time.Time
	for _, p := range l.peers {
		p.mu.Lock()
		idle := !p.gone && p.conn == nil && len(p.pending) == 0 && !p.writing && p.state != "connecting" && p.merged == nil
		t := p.since
		p.mu.Unlock()
		if idle && (idlest == nil || t.Before(since)) {
			idlest, since = p, t
		}
	}
	return idlest != nil && l.forgetLocked(idlest)
}

// ranksFirst is the tie-break between two connections to one peer: both
// sides keep the connection whose dialler ranks first (lowest GID, then
// link ID, then the connection's nonce), so they keep the same one.
func (l *Link) ranksFirst(a, b *conn) bool {
	return bytes.Compare(l.dialerRank(a), l.dialerRank(b)) < 0
}

// dialerRank is the dialling side's lowest GID, link ID and the nonce of
// its hello on c.
func (l *Link) dialerRank(c *conn) []byte {
	var r [16 + 16 + 8]byte
	if c.outgoing {
		copy(r[:], l.minGID[:])
		copy(r[16:], l.id[:])
		binary.BigEndian.PutUint64(r[32:], c.nonce)
	} else {
		g := minGID(c.hello.gids)
		copy(r[:], g[:])
		copy(r[16:], c.hello.id[:])
		binary.BigEndian.PutUint64(r[32:], c.hello.nonce)
	}
	return r[:]
}

func minGID(gids [][16]byte) [16]byte {
	return slices.MinFunc(gids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
}

// detach takes a connection that ended away from its peer, whose writer
// then dials again if it has frames to send, or starts counting the time
// it stays idle.
func (l *Link) detach(c *conn, reason error) {
	l.mu.Lock()
	delete(l.conns, c)
	p := c.p
	l.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.conn == c {
		p.conn = nil
		p.setState("idle")
		if reason != nil {
			p.lastErr = reason
		}
	}
	p.mu.Unlock()
	p.signal()
}
