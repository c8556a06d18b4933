package vrdma

import (
	"net/netip"

	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/proto"
)

// Route is how a device reaches a peer's adapter address: what
// rdma_resolve_addr and rdma_resolve_route find before a connection.
type Route struct {
	SrcAddr  netip.Addr // the device's address (GID; IPv4 unmapped) a connection leaves from
	GIDIndex int        // its index in the device's GID table
	MTU      ibv.MTU    // the port's active MTU, the most a connection's path can have
	Local    bool       // the address is an adapter of this host: connections to it take the memcpy path
}

// ResolveRoute finds how the device reaches the adapter whose address is
// addr, without connecting: the source address and GID index a Dial to it
// would use, and whether it is on this host. An address that no link of
// this host reaches (nothing on its network, or no address of its family)
// is an error matching ErrNotFound, as rdma_cm's ADDR_ERROR. The switch's
// routes decide for vrdma hosts; for any other RoCEv2 peer, the link whose
// network holds the address (the kernel resolves the neighbour).
func (d *Device) ResolveRoute(addr netip.Addr) (Route, error) {
	const op = "cm_resolve"
	if !addr.IsValid() || addr.IsUnspecified() {
		return Route{}, errorf(op, ErrInvalidArgument, "no address: name an address (GID) of the peer's adapter")
	}
	gid := addr.As16()
	var r proto.CMResolveResp
	if _, err := d.c.call(proto.OpCMResolve, proto.CMResolveReq{Addr: gid[:]}, &r); err != nil {
		return Route{}, err
	}
	return Route{SrcAddr: addrOf(r.LocalAddr), GIDIndex: int(r.SGIDIndex), MTU: ibv.MTU(r.MTU), Local: r.Local}, nil
}
