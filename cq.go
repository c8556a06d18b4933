package vrdma

import (
	"context"
	"errors"
	"sync"

	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
)

// WorkCompletion is a completed work request (struct ibv_wc).
type WorkCompletion struct {
	ID        uint64 // the work request's ID (wr_id)
	Status    ibv.Status
	Opcode    ibv.WCOpcode
	ByteLen   uint32
	Imm       uint32 // valid when Flags has WCWithImm
	QPNum     uint32 // the local QP
	SrcQP     uint32 // the sending QP (receives)
	Flags     ibv.WCFlags
	PKeyIndex uint16
}

// Err returns nil for a successful completion and a *WCError otherwise.
func (wc *WorkCompletion) Err() error {
	if wc.Status == ibv.WCSuccess {
		return nil
	}
	return &WCError{ID: wc.ID, Status: wc.Status, Opcode: wc.Opcode, QPNum: wc.QPNum}
}

// CQ is a completion queue. Poll and Wait are safe for concurrent use.
type CQ struct {
	d      *Device
	handle uint32
	cqe    int
	region *shm.Region
	mem    []byte
	ring   abi.RingLayout
	notify *shm.Doorbell

	mu   sync.Mutex
	cons uint32
	e    abi.CQE

	// Completions made in this process by the direct path (direct.go), a
	// ring of cqe entries: hlocal is the oldest, nlocal how many.
	local          []localWC
	hlocal, nlocal int
}

// localWC is a completion made by the direct path, with the ring's
// producer index when it was made: it comes after the ring's completions
// before that index and before the rest.
type localWC struct {
	wc   WorkCompletion
	mark uint32
}

// CreateCQ creates a completion queue holding at least cqe completions.
func (d *Device) CreateCQ(cqe int) (*CQ, error) {
	var r proto.CreateCQResp
	fds, err := d.c.call(proto.OpCreateCQ, proto.CreateCQReq{CQE: cqe}, &r)
	if err != nil {
		return nil, err
	}
	if len(fds) != 3 {
		proto.CloseFDs(fds)
		return nil, errorf("create_cq", ErrVersion, "the daemon passed %d descriptors, 3 expected", len(fds))
	}
	ring := abi.RingLayout{Entries: r.Entries, Stride: abi.CQESize}
	if err := ring.Validate(r.Size); err != nil {
		proto.CloseFDs(fds)
		return nil, errorf("create_cq", ErrVersion, "%v", err)
	}
	region, err := mapShared(fds[0], r.Size)
	if err != nil {
		proto.CloseFDs(fds[1:])
		return nil, &Error{Op: "create_cq", Kind: ErrVersion, Err: err}
	}
	ev, err := shm.DoorbellFrom(fds[1], fds[2])
	if err != nil {
		region.Close()
		return nil, &Error{Op: "create_cq", Kind: ErrVersion, Err: err}
	}
	cq := &CQ{d: d, handle: r.Handle, cqe: r.CQE, region: region, mem: region.Bytes(), ring: ring, notify: ev,
		local: make([]localWC, r.CQE)}
	d.mu.Lock()
	d.cqs[r.Handle] = cq
	d.mu.Unlock()
	return cq, nil
}

// CQE returns the number of completions the CQ holds.
func (cq *CQ) CQE() int { return cq.cqe }

// Poll moves up to len(wc) completions into wc and returns how many
// (ibv_poll_cq), in the order they were made. It does not allocate. After
// an overrun it returns the completions still held and ErrCQOverrun:
// completions were lost, the CQ is in error and must be destroyed. Once
// the device is lost it returns the completions still held, then an error
// matching ErrDeviceFatal.
func (cq *CQ) Poll(wc []WorkCompletion) (int, error) {
	lost := cq.d.lost.Load() // before the ring is read: nothing comes after the loss
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.mem == nil {
		return 0, errCQClosed
	}
	prod := shm.Load32(cq.mem, abi.RingProdOff)
	avail, err := cq.ring.Pending(prod, cq.cons)
	if err != nil {
		return 0, errCQCorrupt
	}
	n, took, read := 0, 0, 0
	for n < len(wc) {
		// A local completion goes first once the ring's made before it are
		// out (its mark is at most prod: marks are read under cq.mu).
		if cq.nlocal > 0 && (read == avail || int32(cq.local[cq.hlocal].mark-cq.cons) <= 0) {
			wc[n] = cq.local[cq.hlocal].wc
			cq.hlocal = (cq.hlocal + 1) % len(cq.local)
			cq.nlocal--
			took++
			n++
			continue
		}
		if read == avail {
			break
		}
		abi.ParseCQE(cq.mem[cq.ring.Entry(cq.cons):], &cq.e)
		cq.cons++
		read++
		w := &wc[n]
		w.ID, w.Status, w.Opcode, w.ByteLen = cq.e.WRID, cq.e.Status, cq.e.Opcode, cq.e.ByteLen
		w.Imm, w.QPNum, w.SrcQP, w.Flags, w.PKeyIndex = cq.e.Imm, cq.e.QPNum, cq.e.SrcQP, cq.e.Flags, cq.e.PKeyIndex
		n++
	}
	if took > 0 {
		shm.Store32(cq.mem, abi.RingHeldOff, uint32(cq.nlocal))
	}
	if read > 0 {
		shm.Store32(cq.mem, abi.RingConsOff, cq.cons)
	}
	if read == avail && cq.nlocal == 0 {
		if shm.Load32(cq.mem, abi.RingErrOff) != 0 {
			return n, errCQOverrun
		}
		if n == 0 && lost {
			return 0, errPollLost
		}
	}
	return n, nil
}

var (
	errCQClosed  = errorf("poll_cq", ErrClosed, "completion queue destroyed")
	errCQCorrupt = errorf("poll_cq", ErrCQOverrun, "completion ring indices are corrupt")
	errCQOverrun = errorf("poll_cq", ErrCQOverrun, "completions were lost because the CQ was full: create a larger CQ or poll more often")
)

// ready reports whether a completion is waiting.
func (cq *CQ) ready() bool {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.mem != nil && (cq.nlocal > 0 || shm.Load32(cq.mem, abi.RingProdOff) != cq.cons || shm.Load32(cq.mem, abi.RingErrOff) != 0)
}

// Wait blocks until a completion is waiting to be polled or ctx ends. It
// arms the CQ and sleeps on its completion channel (ibv_req_notify_cq and
// ibv_get_cq_event in one call); it consumes no completion. Once the
// device is lost and no completion is left it returns an error matching
// ErrDeviceFatal, at once, and so do waits that were asleep then.
func (cq *CQ) Wait(ctx context.Context) error {
	for {
		lost := cq.d.lost.Load() // before ready: the loss wakes us after it is set
		if cq.ready() {
			return nil
		}
		if lost {
			cq.wake() // for another waiter asleep on this CQ, if any
			return errWaitLost
		}
		cq.mu.Lock()
		if cq.mem == nil {
			cq.mu.Unlock()
			return errCQClosed
		}
		shm.Store32(cq.mem, abi.RingNotifyOff, 1)
		cq.mu.Unlock()
		if cq.ready() {
			return nil
		}
		if cq.d.lost.Load() {
			continue
		}
		if err := cq.notify.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return context.DeadlineExceeded // the deadline passed a moment before ctx noticed
			}
			return &Error{Op: "wait_cq", Kind: ErrClosed, Err: err}
		}
	}
}

// wake rings the CQ's doorbell from this side, for a waiter the daemon
// will not wake.
func (cq *CQ) wake() {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.mem != nil {
		cq.notify.Signal()
	}
}

// PollWait polls, spinning up to spin times before it sleeps in Wait: the
// low-latency way to reap one or more completions.
func (cq *CQ) PollWait(ctx context.Context, wc []WorkCompletion, spin int) (int, error) {
	for {
		for i := 0; i <= spin; i++ {
			if n, err := cq.Poll(wc); n > 0 || err != nil {
				return n, err
			}
		}
		if err := cq.Wait(ctx); err != nil {
			return 0, err
		}
	}
}

// Destroy frees the CQ; no QP may still use it.
func (cq *CQ) Destroy() error {
	if err := cq.d.release(proto.OpDestroyCQ, cq.handle); err != nil {
		return err
	}
	cq.d.mu.Lock()
	delete(cq.d.cqs, cq.handle)
	cq.d.mu.Unlock()
	cq.mu.Lock()
	cq.mem = nil
	cq.region.Close()
	cq.mu.Unlock()
	cq.notify.Close()
	return nil
}
