package daemon

import (
	"sync"

	"github.com/vrdma/vrdma/internal/proto"
)

// cmOutboxMaxEvents bounds a session's queued connection manager events:
// far above what its connections can produce.
const cmOutboxMaxEvents = 1 << 16

// cmOutbox queues a session's connection manager events for its event
// sender (cmSession.Emit). Unlike the engine's events, none may be lost — a lost reply would
// leave a dial waiting for its timeout — and the connection manager must
// never wait for a client, so the queue grows; each connection produces a
// few events at most, and a session has a bounded number of them.
type cmOutbox struct {
	mu      sync.Mutex
	q       []proto.CMEvent
	ready   chan struct{} // something was queued
	dropped uint64
}

func newCMOutbox() *cmOutbox { return &cmOutbox{ready: make(chan struct{}, 1)} }

func (o *cmOutbox) push(ev proto.CMEvent) {
	o.mu.Lock()
	if len(o.q) >= cmOutboxMaxEvents {
		o.dropped++
	} else {
		o.q = append(o.q, ev)
	}
	o.mu.Unlock()
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

func (o *cmOutbox) take() []proto.CMEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.q
	o.q = nil
	return q
}

// sendCMEvents sends what s's outbox holds; false if the client is gone.
func (s *session) sendCMEvents() bool {
	for _, ev := range s.cmOut.take() {
		if err := s.conn.Send(proto.Header{Kind: proto.KindEvent, Op: proto.OpCMEvent}, ev); err != nil {
			return false
		}
	}
	return true
}
