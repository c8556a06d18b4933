package daemon

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// On-demand paging (docs/design/odp.md): a region registered with
// IBV_ACCESS_ON_DEMAND is mapped as any other, but not locked, and not
// charged to the process's RLIMIT_MEMLOCK nor to the tenant's locked
// memory: its pages are the application's own pageable memory (its memfd
// backings, charged to its memory cgroup), which the kernel may reclaim
// and faults in again when an operation touches them. The region still
// counts against the tenant's regions.

// onDemand says whether a registration asks for an on-demand region.
func onDemand(req *proto.RegMRReq) bool {
	return abi.Access(req.Access)&abi.AccessOnDemand != 0
}

// lockCharge is what a registration whose memory maps mapped bytes is
// charged as locked: nothing for an on-demand one.
func lockCharge(req *proto.RegMRReq, mapped uint64) uint64 {
	if onDemand(req) {
		return 0
	}
	return mapped
}

// lockedBy is what region m was charged as locked, to give back when it
// goes.
func lockedBy(m *engine.MR) uint64 {
	if _, _, _, access := m.Info(); access&abi.AccessOnDemand != 0 {
		return 0
	}
	return m.Mapped()
}
