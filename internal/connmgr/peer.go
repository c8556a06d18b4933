package connmgr

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/internal/cm"
)

// peer carries CM messages to and from one other daemon over a TCP
// connection, or between the adapters of this host (local). Messages go
// out through a queue that a writer goroutine drains, so that nobody who
// sends (a command, a handler holding the manager's lock) ever waits for
// a socket; one reader goroutine runs what arrives, in order.
type peer struct {
	m        *Manager
	name     string // for messages: "this host", "10.0.0.2:4793", "from 10.0.0.2:41234"
	endpoint string // dialled peers: where to
	expect   string // dialled peers: the identity expected there ("" none)
	local    bool
	gsi      bool       // MADs on QP1 to whichever CM a connection names (gsi.go)
	inbound  bool       // it connected to this daemon's listener
	src      netip.Addr // inbound: its source address
	ident    string     // the identity Config.Authorize named it ("" without one)
	// lastActive is when a message last came or was queued (unix ns),
	// spoke whether one ever came: the listener, when full, closes the
	// idlest inbound peer (admit.go).
	lastActive atomic.Int64
	spoke      atomic.Bool

	ctx    context.Context // ends when the peer is closed (cancels a dial)
	cancel context.CancelFunc

	mu     sync.Mutex
	conn   net.Conn
	q      [][]byte
	vals   []cm.Message // local: the messages this host sends itself
	qBytes int
	dead   bool
	ready  chan struct{} // something was queued
}

// handshakeTries is how many times a peer is dialled when its handshake
// fails for another reason than its authorization.
const handshakeTries = 3

func newPeer(m *Manager, name, endpoint string) *peer {
	p := &peer{m: m, name: name, endpoint: endpoint, ready: make(chan struct{}, 1)}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// peerFor returns the peer that reaches endpoint, where identity expect
// is expected, dialling it if there is none; m.mu is held.
func (m *Manager) peerFor(endpoint, expect string) (*peer, error) {
	if p := m.peers[endpoint]; p != nil {
		if p.expect != expect {
			return nil, fmt.Errorf("the connection manager at %s is %q's, and the switch now says %q is there: try again once the connection to it is gone", endpoint, p.expect, expect)
		}
		return p, nil
	}
	if len(m.peers) >= maxPeers {
		return nil, fmt.Errorf("this daemon has connections to %d other daemons' connection managers, the most it keeps", len(m.peers))
	}
	p := newPeer(m, endpoint, endpoint)
	p.expect = expect
	m.peers[endpoint] = p
	m.wg.Add(1)
	go p.runDialled()
	return p, nil
}

// send encodes msg and queues it for p; m.mu is held. A message that does
// not encode is a bug of this daemon: logged, not sent. Over MADs, v says
// where it goes and what it carries besides (nil: not sent).
func (m *Manager) send(p *peer, v *via, msg cm.Message) {
	if p == nil {
		return
	}
	if p.gsi {
		if v != nil {
			m.queueMAD(v, msg)
		}
		return
	}
	if r, ok := msg.(*cm.REJ); ok {
		r.Text = clip(r.Text)
	}
	if p.local {
		p.pushLocal(msg)
		return
	}
	b, err := msg.Append(nil)
	if err != nil {
		m.log.Error("connection manager: a message of this daemon does not encode", "type", msg.Type(), "err", err)
		return
	}
	p.push(b)
}

// push queues a frame. A TCP peer whose queue overflows has stopped
// reading: its connection is closed, which fails its connections.
func (p *peer) push(frame []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return
	}
	if !p.local && p.qBytes+len(frame) > maxQueue {
		if p.conn != nil {
			p.conn.Close()
		}
		return
	}
	p.q = append(p.q, frame)
	p.qBytes += len(frame)
	p.lastActive.Store(time.Now().UnixNano())
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// pushLocal queues a message of this host for this host: as it is, not
// encoded (SIDR's messages have no frame of the TCP protocol).
func (p *peer) pushLocal(msg cm.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return
	}
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

// take empties the queue.
func (p *peer) take() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.q
	p.q, p.qBytes = nil, 0
	return q
}

// runLocal delivers the frames this host sends itself, in order.
func (p *peer) runLocal() {
	defer p.m.wg.Done()
	for {
		select {
		case <-p.ready:
		case <-p.ctx.Done():
			return
		}
		for _, msg := range p.takeLocal() {
			p.m.handle(p, nil, msg)
		}
	}
}

// runDialled connects to the peer's endpoint, then writes until the peer
// fails or is closed.
func (p *peer) runDialled() {
	defer p.m.wg.Done()
	d := net.Dialer{Timeout: dialTimeout}
	for try := 1; ; try++ {
		c, err := d.DialContext(p.ctx, "tcp", p.endpoint)
		if err != nil {
			p.fail(fmt.Errorf("cannot reach the connection manager at %s (%w): is a vrdma daemon running there, with its CM port open?", p.endpoint, err))
			return
		}
		p.mu.Lock()
		dead := p.dead
		if !dead {
			p.conn = c // fail closes it, ending the handshake below
		}
		p.mu.Unlock()
		if dead {
			c.Close()
			return
		}
		nc, ident, err := p.m.secure(p.ctx, c, true, p.endpoint, p.expect) // admit.go
		if err == nil {
			p.mu.Lock()
			p.ident = ident
			p.mu.Unlock()
			p.m.wg.Add(2)
			go p.readLoop(nc)
			go p.writeLoop(nc)
			return
		}
		c.Close()
		var ae *AuthError
		if try < handshakeTries && !errors.As(err, &ae) && p.ctx.Err() == nil {
			// Cut in its handshake, most likely (a listener under a flood
			// cuts its oldest handshakes): dial again before the requests
			// waiting for this peer fail.
			select {
			case <-time.After(time.Duration(try) * 50 * time.Millisecond):
				continue
			case <-p.ctx.Done():
			}
		}
		if p.ctx.Err() == nil {
			p.m.countRefusal(err)
			p.m.refused("connection manager: connection refused", "peer", p.name, "err", err)
		}
		p.fail(err)
		return
	}
}

// readLoop runs the messages that arrive, until the connection ends or a
// frame is refused, which closes it. An inbound connection that carries
// no CM connection and sends nothing for the idle timeout is closed, and
// a frame must come whole within the handshake timeout of its first byte.
func (p *peer) readLoop(c net.Conn) {
	defer p.m.wg.Done()
	r := bufio.NewReaderSize(c, 4096)
	var buf [cm.MaxFrame]byte
	lim := p.m.adm.lim
	for {
		if p.inbound {
			_ = c.SetReadDeadline(time.Now().Add(lim.IdleTimeout))
			if _, err := r.Peek(1); err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					p.fail(err)
					return
				}
				if p.m.carriesConns(p) {
					continue
				}
				p.m.adm.idleClosed.Add(1)
				err := &idleError{idle: lim.IdleTimeout}
				p.m.adm.log.Log(p.m.log, slog.LevelInfo, "connection manager: closed an idle inbound connection", "peer", p.name, "err", err)
				p.fail(err)
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(lim.HandshakeTimeout))
		}
		msg, err := cm.ReadFrame(r, &buf)
		if err != nil {
			var pe *cm.ProtocolError
			if errors.As(err, &pe) {
				p.m.refused("connection manager: closing a connection that sent a bad frame", "peer", p.name, "err", err)
			}
			p.fail(err)
			return
		}
		p.mu.Lock()
		dead := p.dead
		p.mu.Unlock()
		if dead { // closed meanwhile (evicted, say): what it sent is not run
			return
		}
		p.lastActive.Store(time.Now().UnixNano())
		p.spoke.Store(true)
		p.m.handle(p, nil, msg)
	}
}

// writeLoop writes what is queued; once the peer is closed it writes what
// is left (the DREQs and REJs of sessions that ended) and closes the
// connection.
func (p *peer) writeLoop(c net.Conn) {
	defer p.m.wg.Done()
	var buf []byte
	write := func(timeout time.Duration) error {
		buf = buf[:0]
		for _, f := range p.take() {
			buf = append(buf, f...)
		}
		if len(buf) == 0 {
			return nil
		}
		_ = c.SetWriteDeadline(time.Now().Add(timeout))
		_, err := c.Write(buf)
		return err
	}
	for {
		select {
		case <-p.ready:
			if err := write(writeTimeout); err != nil {
				p.fail(err)
				return
			}
		case <-p.ctx.Done():
			_ = write(time.Second) // the daemon is stopping: do not wait long for a peer that does not read
			c.Close()
			return
		}
	}
}

// fail ends the peer: its connection closes and the connections being set
// up through it fail.
func (p *peer) fail(err error) {
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return
	}
	p.dead = true
	c := p.conn
	p.q, p.qBytes = nil, 0
	p.mu.Unlock()
	p.cancel()
	if c != nil {
		c.Close()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		err = errors.New("the connection closed")
	}
	p.m.peerGone(p, err)
}

// close stops the peer (the daemon is stopping): the writer writes what is
// queued, then closes the connection, which ends the reader.
func (p *peer) close() { p.cancel() }
