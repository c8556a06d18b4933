package tcplink

import (
	"encoding/binary"
	"net/netip"

	"github.com/vrdma/vrdma/internal/admit"
)

// WriteBatch queues frames, each a whole IPv4 or IPv6 packet as package
// wire encodes it, on the send queues of the peers that have their
// destination addresses, and returns how many it queued. A frame whose
// destination no peer answers for, or that does not fit its peer's queue,
// is dropped and counted (Stats), as a NIC drops; the RC transport sends
// it again. A malformed frame stops the batch with a *FrameError: it and
// the frames after it are not queued. After Close it returns ErrClosed.
// WriteBatch does not block on the network and allocates nothing once the
// queues have grown.
func (l *Link) WriteBatch(frames [][]byte) (int, error) {
	if l.isClosed.Load() {
		return 0, ErrClosed
	}
	var (
		p       *peer // the peer of the frames before, locked
		dst     netip.Addr
		queued  int
		noPeer  uint64
		full    uint64
		lastErr error
	)
	unlock := func() {
		if p != nil {
			p.flush() // unlocks
			p = nil
		}
	}
	for i, f := range frames {
		d, why := frameDst(f)
		if why != "" {
			lastErr = &FrameError{Index: i, Reason: why}
			l.stats.badFramesOut.Add(1)
			break
		}
		if d.IsMulticast() {
			unlock()
			n, nf, ff := l.fanOut(d, f)
			noPeer, full = noPeer+nf, full+ff
			if n > 0 || nf == 0 && ff == 0 {
				// One frame of the batch, however many copies; to a
				// group no other host has, it is sent to nobody, as a
				// NIC sends one no host listens to.
				queued++
			}
			continue
		}
		if p == nil || d != dst {
			unlock()
			dst = d
			if p = l.lockPeer(d); p == nil {
				noPeer++
				continue
			}
		}
		if len(p.pending)+frameHeaderLen+len(f) > l.cfg.QueueBytes {
			full++
			continue
		}
		p.pending = binary.BigEndian.AppendUint32(p.pending, uint32(len(f)))
		p.pending = append(p.pending, f...)
		p.pendingFrames++
		queued++
	}
	unlock()
	if noPeer != 0 {
		l.stats.droppedNoPeer.Add(noPeer)
	}
	if full != 0 {
		l.stats.droppedQueueFull.Add(full)
	}
	return queued, lastErr
}

// fanOut queues a copy of frame f, to the multicast group g, to each host
// GroupHosts names, and says how many it queued, how many hosts it found
// no peer for and how many queues were full.
func (l *Link) fanOut(g netip.Addr, f []byte) (queued int, noPeer, full uint64) {
	if l.cfg.GroupHosts == nil {
		return 0, 1, 0
	}
	for _, h := range l.cfg.GroupHosts(g) {
		p := l.lockPeer(h)
		if p == nil {
			noPeer++
			continue
		}
		if len(p.pending)+frameHeaderLen+len(f) > l.cfg.QueueBytes {
			p.mu.Unlock()
			full++
			continue
		}
		p.pending = binary.BigEndian.AppendUint32(p.pending, uint32(len(f)))
		p.pending = append(p.pending, f...)
		p.pendingFrames++
		queued++
		p.flush() // unlocks
	}
	return queued, noPeer, full
}

// lockPeer returns the peer for frames to dst, locked, or nil if there is
// none: a peer that announced dst, else one for the endpoint Config.Peers
// resolves dst to (a new one if need be).
func (l *Link) lockPeer(dst netip.Addr) *peer {
	for range 3 { // a peer forgotten meanwhile is looked up again
		l.mu.RLock()
		p := l.byAddr[dst]
		l.mu.RUnlock()
		if p == nil {
			if p = l.resolve(dst); p == nil {
				return nil
			}
		}
		p.mu.Lock()
		for p.merged != nil {
			q := p.merged
			p.mu.Unlock()
			p = q
			p.mu.Lock()
		}
		if !p.gone {
			return p
		}
		p.mu.Unlock()
	}
	return nil
}

// resolve finds or makes the peer for dst through Config.Peers: the peer
// of the identity expected at the endpoint if the link knows it, else
// the one for the endpoint, else a new one.
func (l *Link) resolve(dst netip.Addr) *peer {
	var ep admit.Endpoint
	ok := false
	if l.cfg.Peers != nil {
		ep, ok = l.cfg.Peers(dst)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	if p := l.byAddr[dst]; p != nil {
		return p
	}
	if !ok || ep.Addr == "" {
		if _, logged := l.noEP[dst]; !logged && len(l.noEP) < 1024 {
			l.noEP[dst] = struct{}{}
			l.log.Warn("tcplink: dropping frames", "err", &NoEndpointError{Dst: dst})
		}
		return nil
	}
	expect := l.expectFor(ep)
	var p *peer
	if expect != "" {
		if p = l.byIdent[expect]; p == nil {
			p = l.expectingLocked(expect)
		}
	}
	if p == nil {
		p = l.byEP[epKey{ep.Addr, expect}]
	}
	if p == nil {
		if p = l.newPeerLocked(ep.Addr, expect); p == nil {
			return nil
		}
	}
	if p.endpoint == "" { // known from its own connection: now it can be dialled back
		p.endpoint, p.expect = ep.Addr, expect
		l.byEP[epKey{ep.Addr, expect}] = p
	}
	l.byAddr[dst] = p
	p.resolved = append(p.resolved, dst)
	return p
}

// QueueRoom returns how many more bytes of frames (with their 4-byte
// length prefixes) the send queue of the peer for dst takes before
// WriteBatch drops: an engine paces READ responses by it
// (engine.PacedLink). It is -1 if no peer answers for dst, whose frames
// are dropped whatever their number.
func (l *Link) QueueRoom(dst netip.Addr) int {
	if l.isClosed.Load() {
		return -1
	}
	p := l.lockPeer(dst)
	if p == nil {
		return -1
	}
	room := l.cfg.QueueBytes - len(p.pending)
	p.mu.Unlock()
	return max(room, 0)
}
