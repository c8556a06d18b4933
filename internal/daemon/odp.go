package daemon

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// On-demand paging (docs/design/odp.md): a region registered with
// IBV_ACCESS_ON_DEMAND is mapped as any other but not locked, and not
// charged to the registering process's RLIMIT_MEMLOCK (pin): its pages
// are the application's own pageable memory, which the kernel may reclaim
// and faults in again when an operation touches them. It still counts
// against the tenant's `locked` limit, the daemon's cap on the registered
// memory it maps: pages the daemon faults in (a hole the tenant punched in
// its memfd, written by a peer) are charged to the daemon, and that limit
// is what bounds them.

// onDemand says whether a registration asks for an on-demand region.
func onDemand(req *proto.RegMRReq) bool {
	return abi.Access(req.Access)&abi.AccessOnDemand != 0
}

// pinCharge is what a registration whose memory maps mapped bytes is
// charged against the process's RLIMIT_MEMLOCK: nothing for an on-demand
// one.
func pinCharge(req *proto.RegMRReq, mapped uint64) uint64 {
	if onDemand(req) {
		return 0
	}
	return mapped
}

// pinnedBy is what region m was charged against its process's
// RLIMIT_MEMLOCK, to give back when it goes.
func pinnedBy(m *engine.MR) uint64 {
	if _, _, _, access := m.Info(); access&abi.AccessOnDemand != 0 {
		return 0
	}
	return m.Mapped()
}
