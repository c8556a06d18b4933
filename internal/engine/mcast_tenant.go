package engine

// Tenants between hosts (docs/design/multicast.md): on a link that
// carries them (the daemons' TCP channel, authenticated), a multicast
// datagram travels with its sender's tenant in front (package wire's
// group tag), and the receiving host hands it to that tenant's members
// only. RoCEv2 has no field for a tenant: a datagram from an RDMA link
// reaches every tenant's members (wireMembers).

import "github.com/vrdma/vrdma/internal/wire"

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
