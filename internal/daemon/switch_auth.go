package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/fabric"
)

// Who is at the other end of a connection between daemons (the TCP channel
// and the connection manager): the host its certificate names (with the
// switch's certificates), or, on an insecure switch, the host whose record
// has the address it comes from. Either way that host must be live on the
// switch, and every address the connection announces must be one of that
// host's: a daemon can neither pose as another host nor claim its
// addresses.

// ErrNotAHost is the error of a connection from no live host of the
// switch.
var ErrNotAHost = errors.New("daemon: not a live host of the switch")

// hostLookupWait bounds the etcd read for a host that the watch has not
// delivered yet (it joined a moment ago).
const hostLookupWait = 2 * time.Second

// authorizePeer is the admit.Authorizer of both listeners.
func (d *Daemon) authorizePeer(p admit.Peer) (string, error) {
	sw := d.sw
	if sw == nil {
		return "", fmt.Errorf("%w: this daemon has not joined its switch yet", ErrNotAHost)
	}
	var name string
	if m := sw.cfg.Member; m != nil {
		n, err := m.VerifyPeer(p.Chain)
		if err != nil {
			return "", err
		}
		name = n
	} else {
		h, ok := sw.hostWithAddr(p.Remote.Addr())
		if !ok {
			return "", fmt.Errorf("%w: no host of switch %s has the address %s it comes from", ErrNotAHost, sw.cfg.Name, p.Remote.Addr())
		}
		name = h.Name
	}
	if name == d.cfg.HostName {
		return "", fmt.Errorf("%w: the connection claims to be this host, %s", ErrNotAHost, name)
	}
	if p.Outgoing && p.Expected != "" && name != p.Expected {
		return "", fmt.Errorf("%w: the daemon at %s is host %s, not %s as the switch says", ErrNotAHost, p.Endpoint, name, p.Expected)
	}
	h, ok := sw.liveHost(name)
	if !ok {
		return "", fmt.Errorf("%w: host %s has no live record on switch %s", ErrNotAHost, name, sw.cfg.Name)
	}
	gids := hostGIDs(h)
	for _, a := range p.Addrs {
		if !gids[a.As16()] {
			return "", fmt.Errorf("%w: host %s announced %s, which is not one of its addresses on the switch", ErrNotAHost, name, a)
		}
	}
	return name, nil
}

// liveHost returns the live record of the host called name: from the
// table the watch keeps, or, for a host that joined a moment ago, from
// etcd.
func (sw *swState) liveHost(name string) (fabric.Host, bool) {
	sw.mu.Lock()
	h, ok := sw.hosts[name]
	sw.mu.Unlock()
	if ok {
		return h, true
	}
	ctx, cancel := context.WithTimeout(sw.ctx, hostLookupWait)
	defer cancel()
	h, err := sw.fab.Host(ctx, name)
	return h, err == nil
}

// hostWithAddr returns the live host other than this one whose record has
// the address a: from the route table, or, for a host that joined a moment
// ago, from etcd.
func (sw *swState) hostWithAddr(a netip.Addr) (fabric.Host, bool) {
	g := a.Unmap().As16()
	if pr := sw.routes.Load().byGID[g]; pr != nil {
		return sw.liveHost(pr.host)
	}
	ctx, cancel := context.WithTimeout(sw.ctx, hostLookupWait)
	defer cancel()
	hosts, err := sw.fab.Hosts(ctx)
	if err != nil {
		return fabric.Host{}, false
	}
	for _, h := range hosts {
		if h.Name != sw.d.cfg.HostName && hostGIDs(h)[g] {
			return h, true
		}
	}
	return fabric.Host{}, false
}

// resolveCMPeer is the connection manager's resolver on a switch: the
// host that has the address, its CM endpoint and its name.
func (d *Daemon) resolveCMPeer(a netip.Addr) (admit.Endpoint, error) {
	sw := d.sw
	if sw == nil {
		return admit.Endpoint{}, fmt.Errorf("this daemon has not joined its switch yet")
	}
	h, ok := sw.hostWithAddr(a)
	if !ok {
		return admit.Endpoint{}, fmt.Errorf("no host of switch %s has the address %s: `vrdma host show` lists the hosts and their addresses", sw.cfg.Name, a)
	}
	if h.CMEndpoint == "" {
		return admit.Endpoint{}, fmt.Errorf("host %s takes no connection requests from other hosts (its daemon runs with --cm-listen off)", h.Name)
	}
	return admit.Endpoint{Addr: h.CMEndpoint, Identity: h.Name}, nil
}
