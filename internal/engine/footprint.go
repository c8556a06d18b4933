package engine

import (
	"fmt"
	"unsafe"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/transport"
)

// The footprint of a queue is every byte the daemon allocates for it: the
// ring region it shares with the client (a memfd the client may fill, so
// all of it counts however little is touched) and the daemon's own
// working memory of the queue. The daemon charges it to the tenant before
// it creates the queue (QPBytes, CQBytes, SRQBytes) and gives back the
// same number when the queue is destroyed (Footprint).

// qpShape is what a QP's capabilities come to: the capabilities granted,
// its rings and the size of its shared region.
type qpShape struct {
	caps   proto.QPCaps
	sq, rq abi.RingLayout // rq is empty with a shared receive queue
	size   int            // bytes of the shared region
}

// shapeQP checks the capabilities a client asks for and rounds them to
// what the QP gets; srq: the QP receives from a shared receive queue.
func shapeQP(c proto.QPCaps, srq bool) (qpShape, error) {
	if c.MaxSendWR < 0 || c.MaxSendWR > MaxQPWR {
		return qpShape{}, fmt.Errorf("max_send_wr %d must be 0..%d", c.MaxSendWR, MaxQPWR)
	}
	if c.MaxSendSGE > MaxSGE || c.MaxRecvSGE > MaxSGE || c.MaxSendSGE < 0 || c.MaxRecvSGE < 0 {
		return qpShape{}, fmt.Errorf("max_send_sge %d / max_recv_sge %d must be 0..%d", c.MaxSendSGE, c.MaxRecvSGE, MaxSGE)
	}
	if c.MaxInlineData < 0 || c.MaxInlineData > MaxInline {
		return qpShape{}, fmt.Errorf("max_inline_data %d must be 0..%d", c.MaxInlineData, MaxInline)
	}
	if !srq && (c.MaxRecvWR < 0 || c.MaxRecvWR > MaxQPWR) {
		return qpShape{}, fmt.Errorf("max_recv_wr %d must be 0..%d (or give the QP a shared receive queue)", c.MaxRecvWR, MaxQPWR)
	}
	if !srq {
		// A QP that only sends may ask for no receive queue, one that
		// only receives for no send queue (rdma_rxe allows both; qperf
		// does it): it gets the smallest one.
		c.MaxRecvWR = max(c.MaxRecvWR, 1)
	}
	c.MaxSendSGE = max(c.MaxSendSGE, 1)
	c.MaxSendWR = abi.RoundPow2(c.MaxSendWR) // a QP that only receives gets the smallest send queue
	var sh qpShape
	sh.sq = abi.RingLayout{Offset: 0, Entries: c.MaxSendWR, Stride: abi.SendStride(c.MaxSendSGE, c.MaxInlineData)}
	// The QP gets what its entries hold, never more than MaxInline: a
	// program that asks again for what it got (libfabric finds the most a
	// device takes, then asks for what the QP reported) is not refused.
	c.MaxInlineData = min(sh.sq.Stride-abi.SendWQEHeader, MaxInline)
	// Rings start on 256-byte boundaries, where the library's layout check
	// expects them (a one-entry send ring would leave the next unaligned).
	sh.size = (sh.sq.Size() + abi.RingHeaderSize - 1) &^ (abi.RingHeaderSize - 1)
	if !srq {
		c.MaxRecvSGE = max(c.MaxRecvSGE, 1)
		c.MaxRecvWR = abi.RoundPow2(c.MaxRecvWR)
		sh.rq = abi.RingLayout{Offset: sh.size, Entries: c.MaxRecvWR, Stride: abi.RecvStride(c.MaxRecvSGE)}
		sh.size += sh.rq.Size()
	} else {
		c.MaxRecvWR, c.MaxRecvSGE = 0, 0
	}
	sh.caps = c
	return sh, nil
}

// Sizes of what the daemon keeps per send request of a QP on the wire path
// (remote.go, package transport), for its footprint.
const (
	sliceHeader = int(unsafe.Sizeof([]byte(nil)))
	pointerSize = int(unsafe.Sizeof((*MR)(nil)))
	wqeState    = int(unsafe.Sizeof(transport.WQE{}))
	// rdAtomicState bounds the responder's state of one outstanding RDMA
	// READ or atomic (transport's resource), of which a QP holds up to
	// MaxRdAtomic.
	rdAtomicState = 64
)

// bytes is the shape's footprint: the shared region, the private copies of
// one send and one receive entry, and, for every send request, what the
// wire path holds (allocated when the QP connects to another host, counted
// from the start): the transport's request, its gather list and regions,
// and a buffer for the QP's inline data; and the responder's READ and
// atomic state.
func (sh qpShape) bytes() uint64 {
	n := sh.size + sh.sq.Stride + sh.rq.Stride
	sge := sh.caps.MaxSendSGE
	perWR := wqeState + 3*sliceHeader + (sge+1)*sliceHeader + sge*pointerSize + sh.caps.MaxInlineData
	n += 3*sliceHeader + sh.caps.MaxSendWR*perWR + MaxRdAtomic*rdAtomicState
	return uint64(n)
}

// QPBytes returns the footprint of a QP created with caps (srq: it
// receives from a shared receive queue), or why such a QP cannot be
// created.
func QPBytes(caps proto.QPCaps, srq bool) (uint64, error) {
	sh, err := shapeQP(caps, srq)
	if err != nil {
		return 0, err
	}
	return sh.bytes(), nil
}

// cqRing is the ring of a CQ able to hold at least cqe completions of
// stride bytes (abi.CQESize, or abi.CQETSSize for a timestamped CQ).
func cqRing(cqe, stride int) abi.RingLayout {
	return abi.RingLayout{Entries: abi.RoundPow2(cqe), Stride: stride}
}

// CQBytes returns the footprint of a CQ of cqe entries (1..MaxCQE).
func CQBytes(cqe int) uint64 { return uint64(cqRing(cqe, abi.CQESize).Size()) }

// TimestampedCQBytes returns the footprint of a timestamped CQ of cqe
// entries (NewTimestampedCQ): twice an ordinary one's entries.
func TimestampedCQBytes(cqe int) uint64 { return uint64(cqRing(cqe, abi.CQETSSize).Size()) }

// BytesFor returns the footprint c would have resized to cqe entries
// (Resize): a timestamped CQ stays one.
func (c *CQ) BytesFor(cqe int) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return uint64(cqRing(cqe, c.ring.Stride).Size())
}

// srqRing is the ring of a shared receive queue.
func srqRing(maxWR, maxSGE int) abi.RingLayout {
	return abi.RingLayout{Entries: abi.RoundPow2(maxWR), Stride: abi.RecvStride(maxSGE)}
}

// SRQBytes returns the footprint of a shared receive queue of maxWR
// entries of maxSGE entries each (1..MaxQPWR, 1..MaxSGE): its ring and the
// private copy of one entry.
func SRQBytes(maxWR, maxSGE int) uint64 {
	r := srqRing(maxWR, maxSGE)
	return uint64(r.Size() + r.Stride)
}

// Footprint returns what QPBytes said the QP would take, for the daemon to
// give back what it charged.
func (q *QP) Footprint() uint64 { return q.footprint }

// Footprint returns what CQBytes said the CQ would take.
func (c *CQ) Footprint() uint64 { c.mu.Lock(); defer c.mu.Unlock(); return uint64(c.ring.Size()) }

// Footprint returns what SRQBytes said the SRQ would take, and on a
// device what its device side holds (device_footprint.go).
func (r *RQ) Footprint() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.footprintLocked()
}

func (r *RQ) footprintLocked() uint64 {
	n := uint64(r.ring.Size() + r.ring.Stride)
	if r.dev != nil {
		n += uint64(devSRQBytes(r.dev.slots.len()))
	}
	return n
}
