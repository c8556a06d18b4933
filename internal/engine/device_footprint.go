package engine

import (
	"unsafe"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/verbs"
)

// A queue of an adapter bound to a verbs uplink holds more in the daemon
// than its rings: the batches it translates the client's requests into
// for the helper, and the slot tables of what the device holds. They
// count in its footprint (footprint.go), so the tenant is charged for
// them as for the wire path's state.

// devBatchBytes is a receive batch and its gather lists (devQP, devSRQ).
const devBatchBytes = verbs.MaxBatch*int(unsafe.Sizeof(verbs.RecvWR{})) + verbs.MaxBatch*verbs.MaxWRSGE*int(unsafe.Sizeof(verbs.SGE{}))

// deviceBytes is what createDevQP allocates for a QP of shape sh: the
// device QP's record, its send and receive batches, its inline buffer, a
// UD QP's batch of datagram sends, and its slot table (newDevSlots).
func (sh qpShape) deviceBytes(ud bool) int {
	n := int(unsafe.Sizeof(devQP{})) + devBatchBytes + verbs.MaxBatch*int(unsafe.Sizeof(verbs.SendWR{})) + verbs.MaxPostBody
	if ud {
		n += verbs.MaxBatch * int(unsafe.Sizeof(verbs.UDSendWR{}))
	}
	n += sh.sq.Entries * int(unsafe.Sizeof(uint64(0))+unsafe.Sizeof(abi.Opcode(0)))
	n += max(abi.RoundPow2(sh.caps.MaxRecvWR), 1) * int(unsafe.Sizeof(uint64(0)))
	return n
}

// devSRQBytes is what PutOnDevice allocates for an SRQ whose slot table
// has n slots: the record, its receive batch and the table (devSRQSlots).
func devSRQBytes(n int) int {
	return int(unsafe.Sizeof(devSRQ{})) + devBatchBytes +
		n*int(unsafe.Sizeof(uint64(0))+unsafe.Sizeof(false)+unsafe.Sizeof(uint16(0))+unsafe.Sizeof(uint32(0)))
}

// QPBytes returns the footprint of a QP of type typ created in pd with
// caps (srq: it receives from a shared receive queue): engine.QPBytes's,
// and, on an adapter bound to a verbs uplink, what its device side holds.
func (pd *PD) QPBytes(caps proto.QPCaps, typ abi.QPType, srq bool) (uint64, error) {
	sh, err := shapeQP(caps, srq)
	if err != nil {
		return 0, err
	}
	n := sh.bytes()
	if (typ == abi.QPTypeRC || typ == abi.QPTypeUD) && pd.adapter.Uplink() != nil { // createDevQP's
		n += uint64(sh.deviceBytes(typ == abi.QPTypeUD))
	}
	return n, nil
}

// SRQBytes returns at most what an SRQ of maxWR entries of maxSGE entries
// each, created in pd, takes: engine.SRQBytes's and, on an adapter bound
// to a verbs uplink (xrc: an XRC SRQ, which stays off the device), its
// device side with a slot per entry. The device may give fewer slots; the
// SRQ's Footprint then says less.
func (pd *PD) SRQBytes(maxWR, maxSGE int, xrc bool) uint64 {
	n := SRQBytes(maxWR, maxSGE)
	if !xrc && pd.adapter.Uplink() != nil {
		n += uint64(devSRQBytes(srqRing(maxWR, maxSGE).Entries))
	}
	return n
}

// SRQBytesFor returns the footprint r would have resized to maxWR entries
// (Resize): its ring's, and on a device its slot table's, which grows to
// the new size and never shrinks.
func (r *RQ) SRQBytesFor(maxWR int) uint64 {
	ring := srqRing(maxWR, r.maxSGE)
	n := uint64(ring.Size() + ring.Stride)
	r.mu.Lock()
	d := r.dev
	r.mu.Unlock()
	if d != nil {
		n += uint64(devSRQBytes(max(d.slots.len(), ring.Entries)))
	}
	return n
}
