package tcplink

import (
	"context"
	"net"
	"net/netip"
)

// dial connects to the peer, runs the handshake and attaches the
// connection, whose reader it starts.
func (p *peer) dial() error {
	l := p.l
	ep := p.dialTarget()
	if ep == "" {
		l.mu.RLock()
		var dst netip.Addr
		if len(p.addrs) > 0 {
			dst = p.addrs[0]
		}
		l.mu.RUnlock()
		return &NoEndpointError{Dst: dst}
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.HandshakeTimeout)
	nc, err := l.dialer.DialContext(ctx, "tcp", ep)
	cancel()
	if err != nil {
		if !l.isClosed.Load() {
			l.stats.dialErrors.Add(1)
		}
		return err
	}
	c := l.newConn(nc, true, p)
	l.mu.Lock()
	ok := l.registerLocked(c)
	l.mu.Unlock()
	if !ok {
		nc.Close()
		return ErrClosed
	}
	host, _, _ := net.SplitHostPort(ep)
	if err := c.handshake(host); err != nil {
		c.handshakeFailed(err)
		return err
	}
	if err := l.attach(c); err != nil {
		c.close(err)
		return err
	}
	l.mu.Lock()
	ok = l.goRunLocked(c.run)
	l.mu.Unlock()
	if !ok {
		c.close(ErrClosed)
		return ErrClosed
	}
	return nil
}

// dialTarget is the endpoint to dial: the peer's own, else what
// Config.Peers resolves one of its addresses to.
func (p *peer) dialTarget() string {
	l := p.l
	l.mu.RLock()
	ep, addrs := p.endpoint, p.addrs
	l.mu.RUnlock()
	if ep != "" || l.cfg.Peers == nil {
		return ep
	}
	for _, a := range addrs {
		if ep, ok := l.cfg.Peers(a); ok && ep != "" {
			l.mu.Lock()
			if p.endpoint == "" {
				p.endpoint = ep
				if l.byEP[ep] == nil {
					l.byEP[ep] = p
				}
			}
			l.mu.Unlock()
			return ep
		}
	}
	return ""
}
