package connmgr

import (
	"github.com/vrdma/vrdma/internal/proto"
)

// Resolve says how s's adapter reaches the adapter address req.Addr
// (rdma_resolve_addr and rdma_resolve_route in one): the source GID a
// connection to it leaves from, the port's MTU, and whether the address is
// one of this host's adapters. An address no link of this host reaches
// (the adapter has no address of its kind — IPv4, IPv6 link-local or
// global IPv6 —, or no link carries that family) is an error matching
// CodeNotFound, as rdma_cm's ADDR_ERROR; the switch's routes (vrdma hosts)
// and the links' networks (any other RoCEv2 peer, whose neighbour the
// kernel resolves) decide.
func (m *commands) Resolve(s Session, req proto.CMResolveReq) (proto.CMResolveResp, error) {
	var none proto.CMResolveResp
	if len(req.Addr) != 16 {
		return none, proto.Errorf(proto.CodeInvalid, "address of %d bytes: a GID has 16 (IPv4 as ::ffff:a.b.c.d)", len(req.Addr))
	}
	dst := [16]byte(req.Addr)
	if dst == ([16]byte{}) {
		return none, proto.Errorf(proto.CodeInvalid, "address :: : name an address of the peer's adapter")
	}
	a := s.Adapter()
	idx, src := sourceGID(a, dst)
	if gidKind(src) != gidKind(dst) {
		return none, proto.Errorf(proto.CodeNotFound, "the adapter has no address of %s's kind (%s) to reach it from: give its link such an address, or name another of the peer's addresses", gidString(dst), kindName(gidKind(dst)))
	}
	resp := proto.CMResolveResp{LocalAddr: src[:], SGIDIndex: idx, MTU: uint8(a.PortMTU()), Local: m.host.IsLocalGID(dst)}
	if !resp.Local {
		if err := m.mad.madRoute(src, dst); err != nil {
			return none, err
		}
	}
	return resp, nil
}

// madRoute is nil if a link of this host carries MADs from src to dst,
// else why not, as the error a dial or a resolution answers.
func (m *madTransport) madRoute(src, dst [16]byte) error {
	if m.gsi == nil {
		return proto.Errorf(proto.CodeNotFound, "cannot find the connection manager of %s: this connection manager has no QP1 (Config.GSI) to reach other hosts with", gidString(dst))
	}
	if err := m.gsi.GSIRoute(src, dst); err != nil {
		return proto.Errorf(proto.CodeNotFound, "cannot find the connection manager of %s: no link of this host reaches it from %s (%v): add a link on its network (vrdma link add), or name another of its addresses", gidString(dst), gidString(src), err)
	}
	return nil
}

func kindName(k int) string {
	switch k {
	case 4:
		return "IPv4"
	case 1:
		return "IPv6 link-local"
	}
	return "global IPv6"
}
