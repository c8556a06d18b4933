package switchagent

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
// switch. (Its text names the daemon, whose error it was before the agent
// had a package of its own: operators' log searches still find it.)
var ErrNotAHost = errors.New("daemon: not a live host of the switch")

// hostLookupWait bounds the etcd read for a host that the watch has not
// delivered yet (it joined a moment ago).
const hostLookupWait = 2 * time.Second

// Authorize is the admit.Authorizer of both listeners between daemons:
// the TCP channel's (the agent gives it its own) and the connection
// manager's (the daemon gives it this method). It names the host at the
// other end of p, or refuses it with an error that matches ErrNotAHost
// (or the certificate's error); before Join has succeeded it refuses
// everyone.
func (a *Agent) Authorize(p admit.Peer) (string, error) {
	if !a.joined.Load() {
		return "", fmt.Errorf("%w: this daemon has not joined its switch yet", ErrNotAHost)
	}
	var name string
	if m := a.cfg.Member; m != nil {
		n, err := m.VerifyPeer(p.Chain)
		if err != nil {
			return "", err
		}
		name = n
	} else {
		h, ok := a.hostWithAddr(p.Remote.Addr())
		if !ok {
			return "", fmt.Errorf("%w: no host of switch %s has the address %s it comes from", ErrNotAHost, a.cfg.Name, p.Remote.Addr())
		}
		name = h.Name
	}
	if name == a.hostName {
		return "", fmt.Errorf("%w: the connection claims to be this host, %s", ErrNotAHost, name)
	}
	if p.Outgoing && p.Expected != "" && name != p.Expected {
		return "", fmt.Errorf("%w: the daemon at %s is host %s, not %s as the switch says", ErrNotAHost, p.Endpoint, name, p.Expected)
	}
	h, ok := a.liveHost(name)
	if !ok {
		return "", fmt.Errorf("%w: host %s has no live record on switch %s", ErrNotAHost, name, a.cfg.Name)
	}
	gids := a.provenGIDs(h)
	for _, addr := range p.Addrs {
		if !gids[addr.As16()] {
			return "", fmt.Errorf("%w: host %s announced %s, which is not one of its addresses on the switch", ErrNotAHost, name, addr)
		}
	}
	return name, nil
}

// liveHost returns the live record of the host called name: from the
// table the watch keeps, or, for a host that joined a moment ago, from
// etcd (as far as this daemon trusts it).
func (a *Agent) liveHost(name string) (fabric.Host, bool) {
	a.mu.Lock()
	h, ok := a.hosts[name]
	a.mu.Unlock()
	if ok {
		return h, true
	}
	for _, lh := range a.etcdHosts() {
		if lh.Name == name {
			return lh, true
		}
	}
	return fabric.Host{}, false
}

// etcdHosts reads the host records from etcd, the ones this daemon trusts.
func (a *Agent) etcdHosts() []fabric.Host {
	ctx, cancel := context.WithTimeout(a.ctx, hostLookupWait)
	defer cancel()
	recs, err := a.fab.LeasedHosts(ctx)
	if err != nil {
		return nil
	}
	var out []fabric.Host
	for _, r := range recs {
		if h, err := a.trusted(r.Host, r.Lease); err == nil {
			out = append(out, h)
		}
	}
	return out
}

// hostWithAddr returns the live host other than this one whose record has
// the address addr, proven (routes.go): from the route table, or, for a
// host that joined a moment ago, from etcd.
func (a *Agent) hostWithAddr(addr netip.Addr) (fabric.Host, bool) {
	g := addr.Unmap().As16()
	if pr := a.routes.Load().byGID[g]; pr != nil {
		if pr.unproven {
			return fabric.Host{}, false
		}
		return a.liveHost(pr.host)
	}
	var found []fabric.Host
	for _, h := range a.etcdHosts() {
		if h.Name != a.hostName && a.provenGIDs(h)[g] {
			found = append(found, h)
		}
	}
	if len(found) != 1 {
		return fabric.Host{}, false // nobody's, or claimed twice: nobody's (routes.go)
	}
	return found[0], true
}
