package tcplink

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// peer is another daemon's link: its send queue, its connection and the
// goroutine (run, in tx.go) that writes the one into the other, dialling
// when there is none.
type peer struct {
	l    *Link
	wake chan struct{} // capacity 1: the writer has something to do

	// Under l.mu.
	endpoint string       // what to dial; "" if unknown
	addrs    []netip.Addr // announced in its hello, or resolved to it
	id       [16]byte     // its link ID, from its last hello
	hasID    bool

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

// newPeerLocked adds a peer and starts its writer; nil if the link is
// closed. l.mu is held.
func (l *Link) newPeerLocked(endpoint string) *peer {
	p := &peer{l: l, wake: make(chan struct{}, 1), endpoint: endpoint, state: "idle", since: time.Now()}
	if !l.goRunLocked(p.run) {
		return nil
	}
	if endpoint != "" {
		l.byEP[endpoint] = p
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

// stateLocked reports the peer; l.mu is held.
func (p *peer) stateLocked() PeerState {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := PeerState{Endpoint: p.endpoint, Addrs: slices.Clone(p.addrs), State: p.state, Since: p.since,
		Queued: len(p.pending), Connects: p.connects, LastError: p.lastErr}
	if c := p.conn; c != nil {
		s.Outgoing, s.Local, s.Remote = c.outgoing, c.raw.LocalAddr().String(), c.remote
	}
	return s
}

// attach gives a connection whose hello is done to its peer: the one whose
// link ID or one of whose addresses the hello announces, else the peer it
// was dialled for, else a new one. If the peer has a connection already,
// one of the two goes: the older if the peer restarted (a new link ID),
// else the one the tie-break ranks second.
func (l *Link) attach(c *conn) error {
	var stale *conn
	defer func() {
		if stale != nil {
			stale.close(errRestarted)
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	q := l.byID[c.hello.id]
	if q == nil {
		for _, a := range c.addrs {
			if q = l.byAddr[a]; q != nil {
				break
			}
		}
	}
	p := c.dialFor
	for p != nil && p.merged != nil {
		p = p.merged
	}
	switch {
	case p == nil && q == nil:
		if p = l.newPeerLocked(""); p == nil {
			return ErrClosed
		}
	case p == nil:
		p = q
	case q != nil && q != p:
		stale = l.mergeLocked(p, q)
		p = q
	}
	if p.hasID && p.id != c.hello.id && l.byID[p.id] == p {
		delete(l.byID, p.id)
	}
	p.id, p.hasID = c.hello.id, true
	l.byID[p.id] = p
	p.addrs = c.addrs
	for _, a := range c.addrs {
		l.byAddr[a] = p
	}
	c.p = p

	p.mu.Lock()
	old := p.conn
	switch {
	case old == nil:
		p.conn = c
	case old.hello.id != c.hello.id: // the peer restarted: old is dead
		p.conn, stale = c, old
	case l.ranksFirst(c, old):
		p.conn = c
		p.toShut = append(p.toShut, old)
		l.stats.duplicates.Add(1)
	default:
		p.toShut = append(p.toShut, c)
		l.stats.duplicates.Add(1)
	}
	p.setState("up")
	l.stats.connects.Add(1)
	if p.connects > 0 {
		l.stats.reconnects.Add(1)
	}
	p.connects++
	p.mu.Unlock()
	p.signal()
	l.log.Info("tcplink: connected", "remote", c.remote, "outgoing", c.outgoing, "peer", c.addrs)
	return nil
}

// errRestarted ends the connection of a peer that reconnected as a new
// link (it restarted).
var errRestarted = &restartedError{}

type restartedError struct{}

func (*restartedError) Error() string {
	return "tcplink: the peer connected again as a new link (it restarted): its old connection is closed"
}

// mergeLocked folds p, dialled for an endpoint, into q, the peer its hello
// showed it to be (reached earlier through another endpoint or address):
// p's addresses, endpoint and queued frames move to q, p's writer ends. It
// returns p's connection, if it had one, which is stale. l.mu is held.
func (l *Link) mergeLocked(p, q *peer) *conn {
	for a, x := range l.byAddr {
		if x == p {
			l.byAddr[a] = q
		}
	}
	if p.endpoint != "" {
		l.byEP[p.endpoint] = q
		if q.endpoint == "" {
			q.endpoint = p.endpoint
		}
	}
	if p.hasID && l.byID[p.id] == p {
		delete(l.byID, p.id)
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
// then dials again if it has frames to send.
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
