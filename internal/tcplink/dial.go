package tcplink

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// dial connects to the peer, runs the handshake and attaches the
// connection, whose reader it starts.
func (p *peer) dial() error {
	l := p.l
	ep, expect := p.dialTarget()
	if ep == "" {
		l.mu.RLock()
		var dst netip.Addr
		if as := p.addrsLocked(); len(as) > 0 {
			dst = as[0]
		}
		l.mu.RUnlock()
		return &NoEndpointError{Dst: dst}
	}
	if expect == "" && l.cfg.Authorize != nil {
		return fmt.Errorf("%w: Config.Peers named no identity for endpoint %s: with Authorize set, it must say whose endpoint it is (Endpoint.Identity)", ErrConfig, ep)
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.HandshakeTimeout)
	d := l.dialer
	d.LocalAddr = l.sourceFor(ep)
	nc, err := d.DialContext(ctx, "tcp", ep)
	cancel()
	if err != nil {
		if !l.isClosed.Load() {
			l.stats.dialErrors.Add(1)
		}
		return err
	}
	c := l.newConn(nc, true, p)
	c.endpoint, c.expect = ep, expect
	l.mu.Lock()
	ok := l.registerLocked(c)
	l.mu.Unlock()
	if !ok {
		nc.Close()
		return ErrClosed
	}
	err = c.handshake()
	if err == nil {
		err = l.attach(c)
	}
	if err != nil {
		c.handshakeFailed(err)
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

// sourceFor is the local address to dial ep from: the one Listen names,
// if it names one of ep's family, so that the peer sees the connection
// come from the address it would dial back (without an Authorizer, the
// address is the identity); else nil, the kernel's choice.
func (l *Link) sourceFor(ep string) net.Addr {
	if !l.local.IsValid() {
		return nil
	}
	a, err := netip.ParseAddr(hostOf(ep))
	if err != nil || a.Unmap().Is4() != l.local.Is4() {
		return nil
	}
	return &net.TCPAddr{IP: l.local.AsSlice()}
}

// dialTarget is the endpoint to dial and the identity expected there: the
// peer's own, else what Config.Peers resolves one of its addresses to. A
// peer whose identity is known expects that one.
func (p *peer) dialTarget() (endpoint, expect string) {
	l := p.l
	l.mu.RLock()
	ep, expect, ident, addrs := p.endpoint, p.expect, p.ident, p.addrsLocked()
	l.mu.RUnlock()
	if ident != "" {
		expect = ident
	}
	if ep != "" || l.cfg.Peers == nil {
		return ep, expect
	}
	for _, a := range addrs {
		e, ok := l.cfg.Peers(a)
		if !ok || e.Addr == "" {
			continue
		}
		want := l.expectFor(e)
		if ident != "" && want != "" && want != ident {
			continue // the switch places a at another host now
		}
		l.mu.Lock()
		if p.endpoint == "" && !p.gone {
			p.endpoint, p.expect = e.Addr, want
			if l.byEP[epKey{e.Addr, want}] == nil {
				l.byEP[epKey{e.Addr, want}] = p
			}
		}
		l.mu.Unlock()
		if ident == "" {
			expect = want
		}
		return e.Addr, expect
	}
	return "", expect
}
