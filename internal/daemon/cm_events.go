package daemon

import (
	"sync"

	"github.com/vrdma/vrdma/internal/proto"
)

// A session's connection manager events wait in its outbox for its event
// sender (session.sendEvents). None may be lost — a lost reply would leave
// a dial waiting for its timeout — and the manager must never wait for a
// client, so the outbox is no fixed ring; what bounds it is the tenant's
// quota. Every event is about a connection the session is charged for
// (CMConns), and a connection that ends is given back only once the
// events queued before its end have been delivered: a client that stops
// reading keeps its connections charged, so what the daemon holds for it
// is at most its cmconn limit of connections, each with its few events.
// Such a client is also told apart (lagging: cmLagEvents waiting) and the
// manager refuses requests to its listeners rather than queue more.

const (
	// cmLagEvents: a session with this many events waiting to be
	// delivered has stopped reading them (a client that reads keeps its
	// outbox near empty: the socket's buffer holds a few hundred more).
	// It is above a listener's default backlog (128).
	cmLagEvents = 256
	// cmOutboxMaxEvents bounds an outbox in any case. The quota keeps it
	// far lower (a connection has up to three events: a request,
	// established, its end; 4096 connections by default); past it, events
	// are dropped and counted.
	cmOutboxMaxEvents = 1 << 14
)

// cmOutbox queues a session's connection manager events.
type cmOutbox struct {
	mu      sync.Mutex
	q       []cmQueued    // q[0] is being sent
	ready   chan struct{} // something was queued
	dropped uint64
}

// cmQueued is an event in the outbox, and the connections whose charges
// come back once it is delivered: they ended after it was queued.
type cmQueued struct {
	ev      proto.CMEvent
	release uint64
}

func newCMOutbox() *cmOutbox { return &cmOutbox{ready: make(chan struct{}, 1)} }

// push queues ev.
func (o *cmOutbox) push(ev proto.CMEvent) {
	o.mu.Lock()
	if len(o.q) >= cmOutboxMaxEvents {
		o.dropped++
	} else {
		o.q = append(o.q, cmQueued{ev: ev})
	}
	o.mu.Unlock()
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// lagging reports whether the client has stopped reading its events.
func (o *cmOutbox) lagging() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.q) >= cmLagEvents
}

// uncharge gives back one connection's charge, with give, once the events
// queued now are delivered: at once if none is.
func (o *cmOutbox) uncharge(give func(n uint64)) {
	o.mu.Lock()
	if n := len(o.q); n > 0 {
		o.q[n-1].release++
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	give(1)
}

// drain sends the queued events in order with send, and gives back with
// give the charges each one held back once it is sent; it returns when
// the outbox is empty, or send's error (the charges still held back are
// the session's end's to give back).
func (o *cmOutbox) drain(send func(proto.CMEvent) error, give func(n uint64)) error {
	for {
		o.mu.Lock()
		if len(o.q) == 0 {
			o.q = nil // let go of the array a burst grew
			o.mu.Unlock()
			return nil
		}
		ev := o.q[0].ev
		o.mu.Unlock()
		err := send(ev)
		o.mu.Lock()
		n := o.q[0].release
		o.q[0] = cmQueued{}
		o.q = o.q[1:]
		o.mu.Unlock()
		if n > 0 {
			give(n)
		}
		if err != nil {
			return err
		}
	}
}

// sendCMEvents sends what s's outbox holds; false if the client is gone.
func (s *session) sendCMEvents() bool {
	return s.cmOut.drain(func(ev proto.CMEvent) error {
		return s.conn.Send(proto.Header{Kind: proto.KindEvent, Op: proto.OpCMEvent}, ev)
	}, s.giveCMConns) == nil
}

// giveCMConns gives back n connections of the session's connection
// manager quota.
func (s *session) giveCMConns(n uint64) { s.give(CMConns, n) }
