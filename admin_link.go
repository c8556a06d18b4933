package vrdma

import "github.com/vrdma/vrdma/ibv"
import "github.com/vrdma/vrdma/internal/proto"

// The daemon's links: RoCEv2 on host interfaces, as `rdma link` manages
// the kernel's Soft-RoCE links.

// LinkSpec is a link to add: `vrdma link add NAME type rxe netdev IFACE
// [dscp N]`, or `vrdma link add NAME type verbs dev IBDEV [port N]`.
type LinkSpec struct {
	Name    string
	Type    string // "rxe": RoCEv2 over UDP, like the kernel's Soft-RoCE; "verbs": a device of the host's rdma-core
	Netdev  string // rxe: the host interface
	DSCP    uint8  // rxe: of the packets it sends, 0 to 63
	Dev     string // verbs: the rdma-core device (mlx5_0, rxe0)
	DevPort uint8  // verbs: its port (1 if 0)
}

// VerbsLinkInfo is a verbs link's device as rdma-core reports it.
type VerbsLinkInfo struct {
	Dev       string
	Port      uint8
	Transport string // "InfiniBand" (IB and RoCE), "iWARP"
	LinkLayer string // "Ethernet", "InfiniBand"
	PortState string // "PORT_ACTIVE", ...
	FWVer     string
	NodeGUID  uint64
	LID       uint16
	MaxMTU    ibv.MTU
	AtomicCap uint32 // 0: no atomics
	GIDs      []VerbsGID
}

// VerbsGID is one entry of a verbs link's GID table.
type VerbsGID struct {
	Index  uint32
	Type   string // "IB", "RoCE v1", "RoCE v2"
	GID    GID
	Netdev string
}

// LinkInfo is a link as `vrdma link show` prints it.
type LinkInfo struct {
	LinkSpec
	State     string // "ACTIVE", "DOWN"
	PhysState string // "LINK_UP", "DISABLED"
	Problem   string // why it is down, if it is
	GIDs      []GID
	ActiveMTU ibv.MTU
	Port      uint16 // UDP port (4791)
	Counters  LinkCounters
	Verbs     *VerbsLinkInfo // a verbs link's device; nil for rxe links, or when it could not be opened
}

// LinkCounters are a link's traffic counters and what the engine dropped
// of what it delivered.
type LinkCounters struct {
	RxPackets uint64
	RxBytes   uint64
	TxPackets uint64
	TxBytes   uint64
	RxNotOurs uint64 // to the port, for another address of the host
	RxDropped uint64
	RxErrors  uint64
	TxErrors  uint64
	TxGSO     uint64 // GSO buffers sent (the bulk path; their packets are in TxPackets)
	RxGSO     uint64 // GSO buffers received whole and cut into their packets
	// What the engine dropped of what the link delivered.
	RxMalformed uint64 // not a RoCEv2 packet the engine can decode
	RxICRC      uint64 // the invariant CRC did not match
	RxUnknownQP uint64 // no such QP, or one of another type, state or connection
	RxBadPKey   uint64
}

func linkInfo(p proto.LinkInfo) LinkInfo {
	// LinkSpec and LinkCounters are the wire's less its JSON tags: a field
	// added to one and not the other fails to compile here.
	l := LinkInfo{LinkSpec: LinkSpec(p.LinkSpec), State: p.State, PhysState: p.PhysState, Problem: p.Problem,
		ActiveMTU: ibv.MTU(p.ActiveMTU), Port: p.Port, Counters: LinkCounters(p.Counters)}
	for _, g := range p.GIDs {
		var x GID
		copy(x[:], g)
		l.GIDs = append(l.GIDs, x)
	}
	if v := p.Verbs; v != nil {
		l.Verbs = &VerbsLinkInfo{Dev: v.Dev, Port: v.Port, Transport: v.Transport, LinkLayer: v.LinkLayer, PortState: v.PortState,
			FWVer: v.FWVer, NodeGUID: v.NodeGUID, LID: v.LID, MaxMTU: ibv.MTU(v.MaxMTU), AtomicCap: v.AtomicCap}
		for _, g := range v.GIDs {
			x := VerbsGID{Index: g.Index, Type: g.Type, Netdev: g.Netdev}
			copy(x.GID[:], g.GID)
			l.Verbs.GIDs = append(l.Verbs.GIDs, x)
		}
	}
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
	if _, err := a.c.call(proto.OpLinkAdd, proto.LinkSpec(s), &info); err != nil {
		return LinkInfo{}, err
	}
	return linkInfo(info), nil
}

// DeleteLink deletes a link (root and the admin group).
func (a *Admin) DeleteLink(name string) error {
	_, err := a.c.call(proto.OpLinkDelete, proto.LinkSpec{Name: name}, nil)
	return err
}
