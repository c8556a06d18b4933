package daemon

import (
	"net/netip"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pathsel"
)

// routeTable is what the engine's router reads, rebuilt whenever a host
// or a local link changes: for every GID of every other host, how to reach
// it. It is replaced whole, never changed, so readers take no lock.
type routeTable struct {
	byGID map[[16]byte]*peerRoute
	rdma  map[[16]byte]engine.Link // this host's RDMA links by GID
}

// peerRoute is how this host reaches one address of another host.
type peerRoute struct {
	host     string
	endpoint string         // its TCP channel, "ip:port"
	choice   pathsel.Choice // between the hosts, with the reason
	viaRDMA  bool           // the address is on one of its RDMA uplinks
}

// endOf is what path selection needs of a host (adapters of one host share
// its uplinks; the port group is the switch's default one).
func endOf(sw string, h fabric.Host) pathsel.End {
	e := pathsel.End{Adapter: "host " + h.Name, Switch: sw, Host: h.Name, HostID: identityKey(h.Identity), PortGroup: DefaultPortGroup}
	e.RDMA = rdmaUplinks(h)
	return e
}

// rdmaUplinks lists a host's RDMA uplinks that are up.
func rdmaUplinks(h fabric.Host) []string {
	var out []string
	for _, u := range h.Uplinks {
		if u.Kind == fabric.UplinkRXE && u.State != fabric.UplinkDown && len(u.GIDs) > 0 {
			out = append(out, u.Name)
		}
	}
	return out
}

func identityKey(id fabric.Identity) string {
	if id.MachineID == "" || id.BootID == "" {
		return ""
	}
	return id.MachineID + "/" + id.BootID + "/" + id.NetNS
}

// hostGIDs returns every GID a host record announces.
func hostGIDs(h fabric.Host) map[[16]byte]bool {
	out := make(map[[16]byte]bool)
	for _, u := range h.Uplinks {
		for _, g := range u.GIDs {
			if a, err := netip.ParseAddr(g); err == nil {
				out[a.As16()] = true
			}
		}
	}
	for _, s := range h.Addrs {
		if a, err := netip.ParseAddr(s); err == nil {
			out[a.As16()] = true
		}
	}
	return out
}

// rebuildLocked recomputes the route table; sw.mu is held.
func (sw *swState) rebuildLocked() {
	self := sw.hostRecord()
	local := endOf(sw.cfg.Name, self)
	rt := &routeTable{byGID: map[[16]byte]*peerRoute{}, rdma: map[[16]byte]engine.Link{}}
	d := sw.d
	d.links.mu.Lock()
	for _, e := range d.links.m {
		if e.l == nil {
			continue
		}
		for _, g := range e.l.GIDs() {
			if _, ok := rt.rdma[g]; !ok {
				rt.rdma[g] = e.l
			}
		}
	}
	d.links.mu.Unlock()
	for name, h := range sw.hosts {
		if name == self.Name || identityKey(h.Identity) == local.HostID {
			continue
		}
		choice, err := pathsel.Select(local, endOf(sw.cfg.Name, h))
		if err != nil {
			sw.d.log.Warn("switch: no path to host", "host", name, "err", err)
			continue
		}
		viaRDMA := map[[16]byte]bool{}
		for _, u := range h.Uplinks {
			if u.Kind != fabric.UplinkRXE || u.State == fabric.UplinkDown {
				continue
			}
			for _, g := range u.GIDs {
				if a, err := netip.ParseAddr(g); err == nil {
					viaRDMA[a.As16()] = true
				}
			}
		}
		for g := range hostGIDs(h) {
			rt.byGID[g] = &peerRoute{host: name, endpoint: h.TCPEndpoint, choice: choice, viaRDMA: viaRDMA[g]}
		}
	}
	sw.routes.Store(rt)
}

// route is the engine's router: DESIGN.md's path table between this host
// and the host that has dgid. Destinations the switch does not know (a
// native RoCEv2 peer) keep the default, an RDMA link.
func (sw *swState) route(sgid, dgid [16]byte) (engine.Route, bool) {
	rt := sw.routes.Load()
	pr := rt.byGID[dgid]
	if pr == nil {
		return engine.Route{}, false
	}
	if pr.choice.Kind == pathsel.RDMA && pr.viaRDMA {
		if l := rt.rdma[sgid]; l != nil {
			return engine.Route{Link: l, Path: engine.PathRDMA}, true
		}
	}
	reason := pr.choice.String()
	if pr.choice.Kind == pathsel.RDMA {
		reason = "tcp: the source or destination GID is not on an RDMA uplink of its host, though " + pr.choice.Reason
	}
	sw.fellBack(pr.host, reason)
	return engine.Route{Link: sw.tcp, Path: engine.PathTCP}, true
}

// fellBack counts a connection (or datagram) that takes the TCP channel
// and logs the reason once per host and reason: a fallback is never silent.
func (sw *swState) fellBack(host, reason string) {
	sw.fallbck.Add(1)
	sw.mu.Lock()
	last := sw.told[host]
	sw.told[host] = reason
	sw.mu.Unlock()
	if last != reason {
		sw.d.log.Info("path falls back to the TCP channel", "host", host, "reason", reason)
	}
}

// peerEndpoint resolves an address to the TCP channel of the host that
// has it, for the TCP link.
func (sw *swState) peerEndpoint(dst netip.Addr) (string, bool) {
	pr := sw.routes.Load().byGID[dst.As16()]
	if pr == nil || pr.endpoint == "" {
		return "", false
	}
	return pr.endpoint, true
}
