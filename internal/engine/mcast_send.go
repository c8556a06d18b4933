package engine

// Multicast datagrams: sent to this host's members by a copy and to other
// hosts on the links; received from the links by every member.

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

// sendMcast sends a datagram to the group dgid: a copy to every QP of q's
// scope on this host attached to it (never q itself: rdma_rxe does not
// loop a datagram back to its sender), and one datagram on the link to the
// group's IP address, which the network copies to the member hosts.
func (q *QP) sendMcast(w *abi.SendWQE, dgid [16]byte, local [][]byte, total uint64, qkey uint32) outcome {
	a := q.adapter
	sent := outcome{bytes: uint32(total)}
	h := a.host
	if h == nil {
		return sent
	}
	members := h.mc.members(q.scope, dgid)
	for _, p := range members {
		if p != q {
			q.deliverUD(p, w, dgid, local, total, qkey)
		}
	}
	if g := h.linkGIDs.Load(); g != nil && len(*g) > 0 {
		_, sgidIndex, _, _ := q.ah(w.AH)
		out := q.sendUDWire(w, dgid, sgidIndex, local, total, qkey)
		q.sendMcastTenant(w, dgid, local, total, qkey)
		return out
	}
	a.Counters.TxPackets.Add(1)
	a.Counters.TxBytes.Add(total)
	a.Counters.PathMemcpy.Add(1)
	return sent
}

// deliverMcast hands a multicast datagram from a link to every QP of the
// host attached to its group (the MGID is its IP destination, IPv4
// mapped, as rdma_rxe reads it), each checking its Q_Key as for a datagram
// of its own.
func (r *receiver) deliverMcast(p *wire.Packet) {
	ctr := &r.wire
	if p.DestQP != MulticastQPN || p.Opcode.Transport() != wire.TransportUD {
		ctr.UnknownQP.Add(1)
		return
	}
	if p.PKey&0x7fff != DefaultPKey&0x7fff {
		ctr.BadKey.Add(1)
		return
	}
	var members []*QP
	switch {
	case r.tenants:
		members = r.h.mc.members(r.tenant, addrGID(p.Dst))
	case r.h.isSwitchHost(addrGID(p.Src)):
		// Another host of the switch: its tagged copy comes on the TCP
		// channel (mcast_tenant.go).
		ctr.NotOurs.Add(1)
		return
	default:
		members = r.h.mc.wireMembers(addrGID(p.Dst))
	}
	if len(members) == 0 {
		ctr.NotOurs.Add(1)
		return
	}
	for _, q := range members {
		if q.accepts(p) {
			r.toQP(q, p)
		}
	}
}
