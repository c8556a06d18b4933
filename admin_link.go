package vrdma

import "github.com/vrdma/vrdma/internal/proto"

// The daemon's links: RoCEv2 on host interfaces, as `rdma link` manages
// the kernel's Soft-RoCE links.

// LinkSpec is a link to add: `vrdma link add NAME type rxe netdev IFACE
// [dscp N]`.
type LinkSpec struct {
	Name   string
	Type   string // "rxe": RoCEv2 over UDP, like the kernel's Soft-RoCE
	Netdev string // the host interface
	DSCP   uint8  // of the packets it sends, 0 to 63
}

// LinkInfo is a link as `vrdma link show` prints it.
type LinkInfo struct {
	LinkSpec
	State     string // "ACTIVE", "DOWN"
	PhysState string // "LINK_UP", "DISABLED"
	Problem   string // why it is down, if it is
	GIDs      []GID
	ActiveMTU MTU
	Port      uint16 // UDP port (4791)
	Counters  LinkCounters
}

// LinkCounters are a link's traffic counters and what the engine dropped
// of what it delivered.
type LinkCounters struct {
	RxPackets   uint64
	RxBytes     uint64
	TxPackets   uint64
	TxBytes     uint64
	RxNotOurs   uint64 // to the port, for another address of the host
	RxDropped   uint64
	RxErrors    uint64
	TxErrors    uint64
	RxMalformed uint64 // not a RoCEv2 packet the engine can decode
	RxICRC      uint64 // the invariant CRC did not match
	RxUnknownQP uint64 // no such QP, or one of another type, state or connection
	RxBadPKey   uint64
	TxGSO       uint64 // GSO buffers sent (the bulk path; their packets are in TxPackets)
	RxGSO       uint64 // GSO buffers received whole and cut into their packets
}

func linkInfo(p proto.LinkInfo) LinkInfo {
	l := LinkInfo{LinkSpec: LinkSpec{Name: p.Name, Type: p.Type, Netdev: p.Netdev, DSCP: p.DSCP},
		State: p.State, PhysState: p.PhysState, Problem: p.Problem, ActiveMTU: MTU(p.ActiveMTU), Port: p.Port}
	for _, g := range p.GIDs {
		var x GID
		copy(x[:], g)
		l.GIDs = append(l.GIDs, x)
	}
	c := p.Counters
	l.Counters = LinkCounters{RxPackets: c.RxPackets, RxBytes: c.RxBytes, TxPackets: c.TxPackets, TxBytes: c.TxBytes,
		RxNotOurs: c.RxNotOurs, RxDropped: c.RxDropped, RxErrors: c.RxErrors, TxErrors: c.TxErrors,
		RxMalformed: c.RxMalformed, RxICRC: c.RxICRC, RxUnknownQP: c.RxUnknownQP, RxBadPKey: c.RxBadPKey,
		TxGSO: c.TxGSO, RxGSO: c.RxGSO}
	return l
}

// Links lists the daemon's links; name, if not empty, picks one (an
// ErrNotFound error if there is none of that name).
func (a *Admin) Links(name string) ([]LinkInfo, error) {
	var r proto.ListLinksResp
	if _, err := a.c.call(proto.OpListLinks, proto.LinkSpec{Name: name}, &r); err != nil {
		return nil, err
	}
	out := make([]LinkInfo, 0, len(r.Links))
	for _, l := range r.Links {
		out = append(out, linkInfo(l))
	}
	return out, nil
}

// AddLink adds a link and returns it as the daemon opened it (root and the
// admin group).
func (a *Admin) AddLink(s LinkSpec) (LinkInfo, error) {
	var info proto.LinkInfo
	if _, err := a.c.call(proto.OpLinkAdd, proto.LinkSpec{Name: s.Name, Type: s.Type, Netdev: s.Netdev, DSCP: s.DSCP}, &info); err != nil {
		return LinkInfo{}, err
	}
	return linkInfo(info), nil
}

// DeleteLink deletes a link (root and the admin group).
func (a *Admin) DeleteLink(name string) error {
	_, err := a.c.call(proto.OpLinkDelete, proto.LinkSpec{Name: name}, nil)
	return err
}
