package tcplink

import (
	"log/slog"
	"math/rand/v2"
	"time"
)

// Reconnection backoff: the first retry after minBackoff, then doubling
// up to maxBackoff, each ±25 %.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = 2 * time.Second
)

var keepalive [frameHeaderLen]byte // an empty frame

// run is the peer's writer: it writes the queue into the connection,
// sends keepalives on an idle one, and starts a dial when there are frames
// and no connection, backing off after failures. A dial runs on a
// goroutine of its own, so a connection the peer opens meanwhile is
// written to at once. A peer with no connection, nothing to send and no
// dial for Config.PeerIdle is forgotten. The writer ends at Close, or when
// the peer is merged into another or forgotten.
func (p *peer) run() {
	l := p.l
	var spare []byte // grows to the queue's high-water mark
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	dialDone := make(chan error, 1)
	var (
		cur       *conn     // the connection written to last
		lastWrite time.Time // on cur
		dialing   bool
		backoff   time.Duration
		notBefore time.Time // of the next dial
		lastUp    time.Time // when a dial last succeeded
		idleSince time.Time // since when the peer has had nothing to do; zero while it has
	)
	for {
		p.mu.Lock()
		if p.merged != nil || p.gone {
			p.mu.Unlock()
			return
		}
		c := p.conn
		var out []byte
		frames := 0
		busy := p.writing // a direct write is under way: it wakes us after
		var shut []*conn
		if !busy { // a direct write may be on one of them: end them after it
			shut, p.toShut = p.toShut, nil
		}
		if c != nil && p.headConn != nil && p.headConn != c {
			p.dropHead() // its connection is gone, and the frame with it
		}
		// A TLS connection may hold sealed records that a direct write
		// left, or that TLS made on its own (seal.go).
		write := c != nil && !busy && (len(p.pending) > 0 || c.sl != nil && c.sl.backlog() > 0)
		if write {
			out, p.pending = p.pending, spare[:0]
			frames, p.pendingFrames = p.pendingFrames, 0
			p.headConn, p.headLen = nil, 0
			p.writing = true
		}
		needConn := c == nil && len(p.pending) > 0
		keepAlive := c != nil && !write && !busy && time.Since(lastWrite) >= l.cfg.KeepAlive
		if keepAlive {
			p.writing = true
		}
		quiet := c == nil && len(p.pending) == 0 && !busy && len(shut) == 0 && !dialing
		p.mu.Unlock()

		for _, x := range shut {
			x.closeWrite()
		}
		if l.isClosed.Load() {
			return
		}
		now := time.Now()
		if c != cur {
			cur, lastWrite = c, now
		}
		switch {
		case write:
			_ = c.nc.SetWriteDeadline(now.Add(DeadAfter * l.cfg.KeepAlive))
			err := c.writeFrames(out)
			p.doneWriting()
			if err != nil {
				l.stats.droppedConnLost.Add(uint64(frames))
				c.close(err)
			} else {
				l.stats.framesOut.Add(uint64(frames))
				l.stats.bytesOut.Add(uint64(len(out) - frameHeaderLen*frames))
			}
			spare, lastWrite = out[:0], now
			continue
		case needConn && dialing:
			timer.Stop()
		case needConn && now.Before(notBefore):
			p.setStateLocking("backoff")
			timer.Reset(notBefore.Sub(now))
		case needConn:
			// The backoff grows with every attempt, successful or not, and
			// starts again once a connection has lasted: a peer that
			// accepts and drops at once is not hammered.
			if now.Sub(lastUp) > 2*maxBackoff {
				backoff = 0
			}
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			p.setStateLocking("connecting")
			l.mu.Lock()
			dialing = l.goRunLocked(func() { dialDone <- p.dial() })
			l.mu.Unlock()
			timer.Stop()
		case keepAlive:
			_ = c.nc.SetWriteDeadline(now.Add(DeadAfter * l.cfg.KeepAlive))
			err := c.writeFrames(keepalive[:])
			p.doneWriting()
			if err != nil {
				c.close(err)
			}
			lastWrite = now
			continue
		case c != nil && !busy:
			timer.Reset(max(l.cfg.KeepAlive-now.Sub(lastWrite), time.Millisecond))
		case c != nil:
			timer.Reset(l.cfg.KeepAlive) // the direct write wakes us when it is done
		case quiet:
			if idleSince.IsZero() {
				idleSince = now
			}
			if wait := l.cfg.PeerIdle - now.Sub(idleSince); wait > 0 {
				timer.Reset(wait)
			} else if p.forget() {
				return
			} else {
				idleSince = time.Time{} // something came meanwhile
				continue
			}
		default:
			timer.Stop()
		}
		if !quiet {
			idleSince = time.Time{}
		}
		select {
		case <-p.wake:
		case <-timer.C:
		case err := <-dialDone:
			dialing = false
			notBefore = time.Now().Add(backoff * time.Duration(75+rand.IntN(51)) / 100)
			if err != nil {
				p.failed(err)
			} else {
				lastUp = time.Now()
			}
		case <-l.done:
			return
		}
	}
}

// forget forgets the idle peer (peer.go); false if it is in use again.
func (p *peer) forget() bool {
	l := p.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	if !l.forgetLocked(p) {
		return false
	}
	l.churnLog.Log(l.log, slog.LevelInfo, "tcplink: forgot an idle peer", "peer", p.nameLocked(), "idle", l.cfg.PeerIdle)
	return true
}

func (p *peer) setStateLocking(s string) {
	p.mu.Lock()
	p.setState(s)
	p.mu.Unlock()
}

// failed records a failed dial. Unless the peer has connected meanwhile,
// the frames queued for it are dropped, as a NIC with no link drops them;
// the next frames try again after the backoff.
func (p *peer) failed(err error) {
	l := p.l
	p.mu.Lock()
	dropped := 0
	if p.conn == nil {
		dropped = p.pendingFrames
		p.pending, p.pendingFrames = p.pending[:0], 0
		p.headConn, p.headLen = nil, 0
		p.setState("backoff")
	}
	p.lastErr = err
	p.mu.Unlock()
	l.stats.droppedNoPeer.Add(uint64(dropped))
	if !l.isClosed.Load() {
		l.log.Warn("tcplink: cannot reach peer", "endpoint", p.endpointName(), "dropped", dropped, "err", err)
	}
}

func (p *peer) endpointName() string {
	p.l.mu.RLock()
	defer p.l.mu.RUnlock()
	return p.endpoint
}
