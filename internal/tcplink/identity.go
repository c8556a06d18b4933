package tcplink

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vrdma/vrdma/internal/admit"
)

// Who a connection's peer is. Config.Authorize names it from what the
// handshake showed (remote address, verified certificate chain, the
// addresses its hello announced); without it, the identity is the remote
// IP address. Peers are keyed by identity: a connection attaches to the
// peer of its identity only (peer.go), so a newcomer of another identity
// never takes over a live connection, whatever link ID or addresses its
// hello carries.

// identify names the peer of c, whose hello is done, and checks what its
// hello announced; an error refuses the connection.
func (l *Link) identify(c *conn) error {
	var id string
	if l.cfg.Authorize == nil {
		id = c.remoteAP.Addr().String()
	} else {
		var err error
		id, err = l.cfg.Authorize(admit.Peer{Remote: c.remoteAP, Outgoing: c.outgoing, Endpoint: c.endpoint,
			Expected: c.expect, Chain: c.chain, Addrs: c.addrs})
		switch {
		case err != nil:
			return &UnauthorizedError{Remote: c.remote, Reason: err.Error(), Err: err}
		case id == "":
			return &UnauthorizedError{Remote: c.remote, Reason: "the authorizer accepted it without naming it (Config.Authorize returned no identity and no error)"}
		}
	}
	if c.outgoing && c.expect != "" && id != c.expect {
		return &WrongPeerError{Endpoint: c.endpoint, Want: c.expect, Got: id}
	}
	if l.cfg.Peers != nil {
		for _, a := range c.addrs {
			ep, ok := l.cfg.Peers(a)
			if !ok || ep.Addr == "" {
				continue
			}
			if want := l.expectFor(ep); want != "" && want != id {
				return &UnauthorizedError{Remote: c.remote, Identity: id,
					Reason: fmt.Sprintf("its hello announces %v, which the switch places at %q (%s)", a, want, ep.Addr)}
			}
		}
	}
	c.ident = id
	return nil
}

// expectFor is the identity expected at a resolved endpoint: the one the
// resolver names if there is an Authorizer to name peers; without one,
// identities are addresses, and it is the endpoint's (if it is one).
func (l *Link) expectFor(ep admit.Endpoint) string {
	if l.cfg.Authorize != nil {
		return ep.Identity
	}
	if a, err := netip.ParseAddr(hostOf(ep.Addr)); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return ""
}

// hostOf is the host part of a host:port, or s itself.
func hostOf(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}
