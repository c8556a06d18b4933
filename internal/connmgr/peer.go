package connmgr

import (
	"context"
	"sync"

	"github.com/vrdma/vrdma/internal/cm"
)

// peer is the other side of connections: the adapters of this host
// (local: messages go through a queue that one goroutine drains, in order,
// so that nobody who sends — a command, a handler holding the manager's
// lock — runs the answer under its own locks), or every remote CM, reached
// by MADs on QP1 (gsi.go).
type peer struct {
	m     *core
	name  string // for messages: "this host", "QP1"
	local bool
	gsi   bool // MADs on QP1 to whichever CM a connection names (gsi.go)

	ctx    context.Context // ends when the peer is closed
	cancel context.CancelFunc

	mu    sync.Mutex
	vals  []cm.Message  // local: the messages this host sends itself
	ready chan struct{} // something was queued
}

func newPeer(m *core, name string) *peer {
	p := &peer{m: m, name: name, ready: make(chan struct{}, 1)}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// pushLocal queues a message of this host for this host, as it is.
func (p *peer) pushLocal(msg cm.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.vals = append(p.vals, msg)
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// takeLocal empties the in-process queue.
func (p *peer) takeLocal() []cm.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.vals
	p.vals = nil
	return v
}

// runLocal delivers the messages this host sends itself, in order.
func (p *peer) runLocal() {
	defer p.m.wg.Done()
	for {
		select {
		case <-p.ready:
		case <-p.ctx.Done():
			return
		}
		for _, msg := range p.takeLocal() {
			p.m.msgs.handle(p, nil, msg)
		}
	}
}

// close stops the peer (the daemon is stopping).
func (p *peer) close() { p.cancel() }
