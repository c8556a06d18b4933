package switchagent

import (
	"bytes"
	"log/slog"
	"net/netip"
	"sort"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pathsel"
)

// routeTable is what the engine's router reads, rebuilt whenever a host
// or a local link changes: for every GID of every other host, how to reach
// it. It is replaced whole, never changed, so readers take no lock.
type routeTable struct {
	byGID  map[[16]byte]*peerRoute
	rdma   map[[16]byte]engine.Link  // this host's RDMA links by GID
	byHost map[string]pathsel.Choice // the path chosen to each other host
	// members: every address a host of the switch publishes (this one's,
	// and those two hosts claim, too): what the engine takes packets from
	// on a switch with certificates (isMember).
	members map[[16]byte]bool
	// groupHosts: one address of each other host that has a TCP channel
	// endpoint, by host name: where the TCP channel sends a copy of a
	// multicast datagram (docs/design/multicast.md).
	groupHosts []netip.Addr
}

// peerRoute is how this host reaches one address of another host.
type peerRoute struct {
	host     string
	endpoint string // its TCP channel, "ip:port"
	// unproven: a link-local GID, which no certificate lists, on a switch
	// with certificates: it routes RDMA, but names its host to nobody (the
	// TCP channel's resolver, the CM's, the authorizer).
	unproven bool
	choice   pathsel.Choice // between the hosts, with the reason
	viaRDMA  bool           // the address is on one of its RDMA uplinks
	// onDevice: the address is a RoCE v2 GID of one of its verbs uplinks
	// whose daemon carries QPs there: the QPs of instances bound to it are
	// the device's, which RoCE on the wire reaches and the TCP channel
	// does not, so packets to it take an RDMA uplink of this host whatever
	// the hosts' choice.
	onDevice bool
	// fallback is why packets to the address take the TCP channel although
	// the hosts' choice is rdma ("" when they do not); told is set once
	// the fallback has been logged for this table.
	fallback string
	told     *atomic.Bool // shared by the host's addresses
}

// HostEnd is what path selection needs of a host of the switch (adapters
// of one host share its uplinks; the port group is the switch's default
// one): `vrdma path` sets the adapter and its port group.
func (a *Agent) HostEnd(h fabric.Host) pathsel.End {
	e := pathsel.End{Adapter: "host " + h.Name, Switch: a.cfg.Name, Host: h.Name, HostID: identityKey(h.Identity), PortGroup: DefaultPortGroup}
	e.RDMA = rdmaUplinks(h)
	e.Verbs = verbsPorts(h)
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

// memberGIDs are the addresses of another host's trusted record that count
// as the switch's (isMember): its proven ones, and the IPv6 link-local GIDs
// of its RDMA uplinks that are up. Those cannot be proven, but RoCEv2
// between members uses them (rxe's GID index 0 is link-local: programs
// that address by LID, and RoCEv2 over IPv6 link-local); they count only
// there, where packets from them could come, and not as the link-local
// addresses of a record or a down uplink (docs/design/native-endpoints.md,
// "Outside the switch").
func memberGIDs(proven map[[16]byte]bool, h fabric.Host) map[[16]byte]bool {
	for _, u := range h.Uplinks {
		if u.Kind != fabric.UplinkRXE || u.State == fabric.UplinkDown {
			continue
		}
		for _, s := range u.GIDs {
			if g, err := netip.ParseAddr(s); err == nil && unprovable(g.As16()) {
				proven[g.As16()] = true
			}
		}
	}
	return proven
}

// rebuildLocked recomputes the route table; a.mu is held.
func (a *Agent) rebuildLocked() {
	self := a.Record()
	local := a.HostEnd(self)
	rt := &routeTable{byGID: map[[16]byte]*peerRoute{}, rdma: map[[16]byte]engine.Link{}, byHost: map[string]pathsel.Choice{},
		members: hostGIDs(self)}
	for _, up := range a.uplinks() {
		if up.Link == nil {
			continue
		}
		for _, g := range up.Link.GIDs() {
			if _, ok := rt.rdma[g]; !ok {
				rt.rdma[g] = up.Link
			}
		}
	}
	contested := map[[16]byte]bool{}
	for name, h := range a.hosts {
		for g := range memberGIDs(a.provenGIDs(h), h) {
			rt.members[g] = true
		}
		if name == self.Name || identityKey(h.Identity) == local.HostID {
			continue
		}
		choice, err := pathsel.Select(local, a.HostEnd(h))
		if err != nil {
			a.log.Warn("switch: no path to host", "host", name, "err", err)
			continue
		}
		rt.byHost[name] = choice
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
		onDevice := deviceGIDs(h)
		told := new(atomic.Bool)
		for g := range hostGIDs(h) {
			if prev := rt.byGID[g]; prev != nil || contested[g] {
				// Two hosts claim the address: it routes to neither.
				if prev != nil {
					a.refuseLog.Log(a.log, slog.LevelWarn, "switch: two hosts claim one address: it routes to neither", "gid", netip.AddrFrom16(g), "hosts", []string{prev.host, name})
				}
				delete(rt.byGID, g)
				contested[g] = true
				continue
			}
			pr := &peerRoute{host: name, endpoint: h.TCPEndpoint, choice: choice, viaRDMA: viaRDMA[g], told: told,
				unproven: a.cfg.Member != nil && unprovable(g), onDevice: onDevice[g]}
			switch {
			case pr.onDevice:
				pr.fallback = "tcp, which cannot reach it: the destination GID is a device's (a verbs uplink of host " + name + ": the QPs of instances bound to it are the device's), which only RoCE on the wire reaches, and the source GID is on no RDMA uplink of this host"
			case choice.Kind == pathsel.RDMA:
				pr.fallback = "tcp: the source or destination GID is not on an RDMA uplink of its host, though " + choice.Reason
			}
			rt.byGID[g] = pr
		}
	}
	rt.groupHosts = groupHosts(rt.byGID)
	a.routes.Store(rt)
}

// deviceGIDs are the RoCE v2 GIDs of a host's verbs uplinks that are up
// and whose daemon carries QPs on them: bound instances' QPs are there.
func deviceGIDs(h fabric.Host) map[[16]byte]bool {
	out := map[[16]byte]bool{}
	for _, u := range h.Uplinks {
		if u.Kind != fabric.UplinkVerbs || u.State == fabric.UplinkDown || !u.CarriesQPs {
			continue
		}
		for i, s := range u.GIDs {
			if i < len(u.GIDTypes) && u.GIDTypes[i] == "RoCE v2" {
				if g, err := netip.ParseAddr(s); err == nil {
					out[g.As16()] = true
				}
			}
		}
	}
	return out
}

// groupHosts picks one routable address of each host with a TCP channel
// endpoint (the lowest, so that the choice is stable), in host order.
func groupHosts(byGID map[[16]byte]*peerRoute) []netip.Addr {
	pick := map[string][16]byte{}
	for g, pr := range byGID {
		if pr.endpoint == "" || pr.unproven {
			continue
		}
		if cur, ok := pick[pr.host]; !ok || bytes.Compare(g[:], cur[:]) < 0 {
			pick[pr.host] = g
		}
	}
	names := make([]string, 0, len(pick))
	for n := range pick {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]netip.Addr, 0, len(names))
	for _, n := range names {
		out = append(out, netip.AddrFrom16(pick[n]).Unmap())
	}
	return out
}

// multicastHosts is the TCP channel's GroupHosts: every other host of the
// switch, since the switch does not yet record which hosts have members
// of a group (their engines drop what no QP of theirs is attached to).
// It takes no lock and allocates nothing.
func (a *Agent) multicastHosts(netip.Addr) []netip.Addr {
	return a.routes.Load().groupHosts
}

// isMember is the engine's membership test (engine.Members) on a switch
// with certificates: gid is an address a host of the switch publishes. It
// takes no lock and allocates nothing: the engine asks per packet.
func (a *Agent) isMember(gid [16]byte) bool {
	return a.routes.Load().members[gid]
}

// RouteChoice returns the path the route table chose to host — what new
// connections to it take — and false if the table has none: the host is
// this one, or its record has not reached this daemon's watch (a direct
// read of the records may be ahead of it), or no path exists.
func (a *Agent) RouteChoice(host string) (pathsel.Choice, bool) {
	c, ok := a.routes.Load().byHost[host]
	return c, ok
}

// route is the engine's router: DESIGN.md's path table between this host
// and the host that has dgid, for the engine's own QPs (those of instances
// not bound to a verbs uplink: a bound instance's QPs are its device's and
// never ask). A RoCE v2 GID of another host's verbs uplink that carries
// QPs takes an RDMA uplink of this host (software RoCEv2 is what reaches a
// device's QPs; docs/design/verbs-uplink-paths.md).
// Destinations the switch does not know (a native RoCEv2 peer) keep the
// default, an RDMA link.
func (a *Agent) route(sgid, dgid [16]byte) (engine.Route, bool) {
	rt := a.routes.Load()
	pr := rt.byGID[dgid]
	if pr == nil {
		return engine.Route{}, false
	}
	if pr.choice.Kind == pathsel.RDMA && pr.viaRDMA || pr.onDevice {
		if l := rt.rdma[sgid]; l != nil {
			return engine.Route{Link: l, Path: engine.PathRDMA}, true
		}
	}
	a.fellBack(pr)
	return engine.Route{Link: a.tcp, Path: engine.PathTCP}, true
}

// fellBack counts a connection (or datagram) that takes the TCP channel and
// logs why once per host and route table: a fallback is never silent. It
// takes no lock and allocates nothing: UD asks per datagram.
func (a *Agent) fellBack(pr *peerRoute) {
	a.fallbck.Add(1)
	if pr.told.Swap(true) {
		return
	}
	reason := pr.fallback
	if reason == "" {
		reason = pr.choice.String()
	}
	a.log.Info("path falls back to the TCP channel", "host", pr.host, "reason", reason)
}

// peerEndpoint resolves an address to the TCP channel of the host that
// has it, and the host's name (the identity the TCP link expects there
// once it has an Authorizer), for the TCP link.
func (a *Agent) peerEndpoint(dst netip.Addr) (admit.Endpoint, bool) {
	pr := a.routes.Load().byGID[dst.As16()]
	if pr == nil || pr.endpoint == "" || pr.unproven {
		return admit.Endpoint{}, false
	}
	return admit.Endpoint{Addr: pr.endpoint, Identity: pr.host}, true
}
