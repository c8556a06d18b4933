package engine

// Tenants between hosts (docs/design/multicast.md): on a link that
// carries them (the daemons' TCP channel, authenticated), a multicast
// datagram travels with its sender's tenant in front (package wire's
// group tag), and the receiving host hands it to that tenant's members
// only. RoCEv2 has no field for a tenant, so between the switch's hosts a
// datagram always takes the channel too: a host with RDMA links sends it
// there once, to the group, and on its RDMA link for the hosts outside the
// switch (rdma_rxe's); a datagram that comes on an RDMA link from another
// host of the switch is dropped (its tagged copy comes on the channel),
// one from elsewhere reaches every tenant's members (wireMembers).

import (
	"net/netip"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

// A TenantLink is a link between vrdma daemons that carries a multicast
// datagram's tenant when CarriesTenants is true: the engine sends its
// multicast datagrams on it tagged (wire.AppendGroupTag) and delivers
// those it receives to the tagged tenant's members alone; an untagged
// one reaches only QPs of no tenant ("" scope).
type TenantLink interface {
	Link
	CarriesTenants() bool
}

// groupTag returns the tenant to put in front of a datagram to dgid on
// link l: q's, when dgid is a group and l carries tenants; else "".
func (q *QP) groupTag(l Link, dgid [16]byte) string {
	if !IsMulticastGID(dgid) || !wire.ValidGroupTenant(q.scope) {
		return ""
	}
	if tl, ok := l.(TenantLink); ok && tl.CarriesTenants() {
		return q.scope
	}
	return ""
}

// untag takes a frame's group tag off, on a link that carries tenants,
// and keeps its tenant in r.tenant ("" for an untagged frame). It returns
// nil for a frame it refuses: a tag that is malformed or on a link that
// carries none.
func (r *receiver) untag(frame []byte) (dgram []byte, tagged bool) {
	if !wire.IsGroupTagged(frame) {
		r.tenant = ""
		return frame, false
	}
	if !r.tenants {
		return nil, true
	}
	tenant, dgram, err := wire.SplitGroupTag(frame)
	if err != nil || len(dgram) == 0 {
		return nil, true
	}
	if string(tenant) != r.tenant {
		r.tenant = string(tenant)
	}
	return dgram, true
}

// tenantPath is the host's link that carries tenants, and its GIDs.
type tenantPath struct {
	link Link
	gids [][16]byte
}

// refreshTenantPathLocked finds the link that carries tenants; h.mu is
// held.
func (h *Host) refreshTenantPathLocked() {
	for _, l := range h.links {
		if tl, ok := l.(TenantLink); ok && tl.CarriesTenants() {
			if old := h.tenantPath.Load(); old != nil && old.link == l && equalGIDs(old.gids, l.GIDs()) {
				return
			}
			h.tenantPath.Store(&tenantPath{link: l, gids: l.GIDs()})
			return
		}
	}
	h.tenantPath.Store(nil)
}

// sendMcastTenant sends the datagram to group dgid on the link that
// carries tenants, tagged, when sendUDWire took another (an RDMA link):
// the switch's other hosts take a group's datagrams from there only. Its
// source is the link's address of the group's family, or for an IPv6
// group an IPv4 one in its mapped form (the RoCEv2 GID of an IPv4
// address), which the channel takes as that address.
func (q *QP) sendMcastTenant(w *abi.SendWQE, dgid [16]byte, local [][]byte, total uint64, qkey uint32) {
	tp := q.adapter.host.tenantPath.Load()
	rm := q.rm
	if tp == nil || rm == nil || rm.path.link == tp.link {
		return
	}
	if src, ok := tenantSource(tp.gids, gidAddr(dgid).Is4()); ok {
		rm.sendUDVia(w, tp.link, PathTCP, src, dgid, local, total, qkey)
	}
}

// tenantSource picks the source of a group datagram on the channel from
// its GIDs: the first routable one of the group's family, else, for an
// IPv6 group, the first routable IPv4 one, mapped.
func tenantSource(gids [][16]byte, v4 bool) (netip.Addr, bool) {
	var mapped netip.Addr
	for _, g := range gids {
		a := netip.AddrFrom16(g).Unmap()
		if a.IsLinkLocalUnicast() {
			continue
		}
		if a.Is4() == v4 {
			return a, true
		}
		if !v4 && !mapped.IsValid() {
			mapped = netip.AddrFrom16(g)
		}
	}
	return mapped, mapped.IsValid()
}

// SetSwitchHosts installs f (nil: none), which tells the addresses of the
// switch's hosts: a multicast datagram from one of them on an RDMA link
// is dropped, since its tenant's copy comes on the link that carries
// tenants.
func (h *Host) SetSwitchHosts(f Members) {
	if f == nil {
		h.switchHosts.Store(nil)
		return
	}
	h.switchHosts.Store(&f)
}

// isSwitchHost reports whether gid is another host of the switch's (and
// not one of this host's own addresses).
func (h *Host) isSwitchHost(gid [16]byte) bool {
	f := h.switchHosts.Load()
	return f != nil && (*f)(gid) && !h.isLinkGID(gid)
}
