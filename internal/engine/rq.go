package engine

import (
	"sync"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
)

// RQ is a receive queue, a QP's own or a shared one (SRQ): the client
// produces receive requests, whichever worker delivers a message consumes.
type RQ struct {
	Handle uint32 // SRQs: the client's handle
	Events EventSink

	mu      sync.Mutex
	mem     []byte // the shared region holding the ring; nil once closed
	ring    abi.RingLayout
	maxSGE  int
	cons    uint32        // the daemon's own copy
	consPub atomic.Uint32 // cons, readable without the lock
	buf     []byte        // private copy of the entry being parsed
	pd      *PD
	users   int
	region  *shm.Region // owned only by SRQs
	limit   int         // SRQs: the armed limit event, 0 for none (srq_modify.go)

	// A bound adapter's SRQ: the device's (device_srq.go); set before the
	// SRQ is shared, nil otherwise.
	dev *devSRQ

	// XRC SRQs (xrc.go): the domain, the completion queue and the number.
	xrcd *XRCD
	cq   *CQ
	num  uint32
}

func newRQ(mem []byte, ring abi.RingLayout, maxSGE int, pd *PD) *RQ {
	return &RQ{mem: mem, ring: ring, maxSGE: maxSGE, pd: pd, buf: make([]byte, ring.Stride)}
}

// NewSRQ creates a shared receive queue of at least maxWR entries.
func NewSRQ(pd *PD, maxWR, maxSGE int) (*RQ, error) {
	ring := srqRing(maxWR, maxSGE)
	region, err := shm.NewRegion("vrdma-srq", ring.Size())
	if err != nil {
		return nil, err
	}
	rq := newRQ(region.Bytes(), ring, maxSGE, pd)
	rq.region = region
	return rq, nil
}

// Ring, RegionFD and Size describe an SRQ's shared region.
func (r *RQ) Ring() abi.RingLayout { r.mu.Lock(); defer r.mu.Unlock(); return r.ring }
func (r *RQ) RegionFD() int        { r.mu.Lock(); defer r.mu.Unlock(); return r.region.FD() }
func (r *RQ) Size() int            { r.mu.Lock(); defer r.mu.Unlock(); return len(r.mem) }

type popResult uint8

const (
	popOK      popResult = iota
	popEmpty             // no receive posted: RNR
	popBad               // the entry is malformed (w.WRID is valid)
	popCorrupt           // the indices are impossible
)

// pop takes the next receive request into w, and raises an SRQ's limit
// event when that leaves fewer posted than its limit.
func (r *RQ) pop(w *abi.RecvWQE) popResult {
	res, limit := r.popLocked(w)
	if limit {
		r.raiseLimit()
	}
	return res
}

func (r *RQ) popLocked(w *abi.RecvWQE) (popResult, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return popCorrupt, false
	}
	prod := shm.Load32(r.mem, r.ring.Offset+abi.RingProdOff)
	n, err := r.ring.Pending(prod, r.cons)
	if err != nil {
		return popCorrupt, false
	}
	if n == 0 {
		return popEmpty, false
	}
	off := r.ring.Entry(r.cons)
	copy(r.buf, r.mem[off:off+r.ring.Stride])
	r.cons++
	r.publishCons()
	limit := r.limitReached(prod)
	if abi.ParseRecvWQE(r.buf, w, r.maxSGE) != nil {
		return popBad, limit
	}
	return popOK, limit
}

// empty reports whether no receive request is posted.
func (r *RQ) empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return true
	}
	return shm.Load32(r.mem, r.ring.Offset+abi.RingProdOff) == r.cons
}

func (r *RQ) publishCons() {
	shm.Store32(r.mem, r.ring.Offset+abi.RingConsOff, r.cons)
	r.consPub.Store(r.cons)
}

// pending reports, without the lock, whether requests are posted beyond
// what the daemon consumed. mem is the caller's mapping of the ring.
func (r *RQ) pending(mem []byte) bool {
	return shm.Load32(mem, r.ring.Offset+abi.RingProdOff) != r.consPub.Load()
}

// Use, Unuse and Busy count the QPs attached to an SRQ.
// PD returns the protection domain of an SRQ.
func (r *RQ) PD() *PD { return r.pd }

func (r *RQ) Use()       { r.mu.Lock(); r.users++; r.mu.Unlock() }
func (r *RQ) Unuse()     { r.mu.Lock(); r.users--; r.mu.Unlock() }
func (r *RQ) Busy() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.users > 0 }

// close detaches the ring; later pops fail.
func (r *RQ) close() {
	r.mu.Lock()
	r.mem = nil
	r.mu.Unlock()
}

// Close frees an SRQ.
func (r *RQ) Close() {
	r.closeDevice()
	r.closeXRC()
	r.close()
	if r.region != nil {
		r.region.Close()
	}
}

// discard drops every posted request without completing it (QP to RESET).
func (r *RQ) discard() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return
	}
	r.cons = shm.Load32(r.mem, r.ring.Offset+abi.RingProdOff)
	r.publishCons()
}
