package engine

// Shared receive queues of an adapter bound to a device
// (docs/design/verbs-uplink-binding.md, "SRQs on the device"): the SRQ is
// the device's, and its QPs are made on it. The client posts into the
// SRQ's ring as on the software path; the ring's notify word is set, so
// the library rings the SRQ's doorbell after each post, and the SRQ's own
// runner hands what was posted to the device SRQ, one batch per doorbell.
//
// The device completes an SRQ's receives in any order across its QPs: the
// engine's work request ID names a slot of the SRQ's table (devSRQSlots),
// which gives the client's ID back and is freed at completion. The ring's
// slot is freed when the runner takes the request, as a QP's receive ring's
// is; the table bounds what the device holds to the SRQ's depth.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
)

// SRQDevice is what the engine asks of a device for SRQs: *verbs.Device.
// A Device without it keeps refusing QPs on an SRQ (ErrDeviceQP).
type SRQDevice interface {
	CreateSRQ(verbs.SRQAttr) (verbs.SRQ, error)
	ModifySRQ(verbs.SRQ, uint32, verbs.SRQAttr) error
	QuerySRQ(verbs.SRQ) (verbs.SRQAttr, error)
	DestroySRQ(verbs.SRQ) error
	PostSRQRecv(verbs.SRQ, []verbs.RecvWR) error
	CreateQPOnSRQ(send, recv verbs.CQ, s verbs.SRQ, c verbs.QPCap) (verbs.QP, error)
}

// devSRQTag marks an SRQ receive's work request ID: the SRQ's number on
// the uplink in bits 32-47, the table slot in the low 16 bits (an SRQ has
// at most MaxQPWR entries) and the slot's use count in bits 16-31, so that
// a stale completion does not free the slot's next request.
const devSRQTag = uint64(0x5352) << 48 // "SR"

// devSRQ is an SRQ's counterpart on the device and its runner.
type devSRQ struct {
	rq   *RQ
	u    *DeviceUplink
	dev  SRQDevice
	srq  verbs.SRQ
	id   uint32 // in u.srqs, and in the work request IDs
	bell *shm.Doorbell
	stop atomic.Bool // closeDevice: the runner returns at its next wake-up
	done chan struct{}

	// The runner's (one goroutine): the batch it translates into.
	recvs []verbs.RecvWR
	sges  []verbs.SGE
	wqe   abi.RecvWQE

	slots devSRQSlots
}

// devSRQSlots is what the engine remembers of the receives the device SRQ
// holds: the client's ID by slot, freed in any order.
type devSRQSlots struct {
	mu   sync.Mutex
	wrid []uint64
	held []bool
	gen  []uint16 // each slot's uses, in its IDs
	free []uint32 // the slots not held, a stack
	wait bool     // the runner stopped for want of a free slot
	gone bool     // the device went away or the SRQ closed: nothing more is held
}

// init makes n free slots.
func (s *devSRQSlots) init(n int) {
	s.wrid, s.held, s.gen, s.free = make([]uint64, n), make([]bool, n), make([]uint16, n), make([]uint32, n)
	for i := range s.free {
		s.free[i] = uint32(n - 1 - i)
	}
}

// take returns the ID of a free slot now holding wrid (its index and use
// count); false when none is free (then the runner waits for a
// completion).
func (s *devSRQSlots) take(wrid uint64) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) == 0 || s.gone {
		s.wait = !s.gone
		return 0, false
	}
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.wrid[i], s.held[i] = wrid, true
	s.gen[i]++
	return i | uint32(s.gen[i])<<16, true
}

// give frees the slot of ID id (take's) and returns the client's ID it
// held; false when it holds no request of that ID (a completion the engine
// did not give, or one after a flush). wake says the runner waits for a
// slot.
func (s *devSRQSlots) give(id uint32) (wrid uint64, ok, wake bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := id & 0xffff
	if int(i) >= len(s.held) || !s.held[i] || s.gen[i] != uint16(id>>16) {
		return 0, false, false
	}
	s.held[i] = false
	s.free = append(s.free, i)
	wake, s.wait = s.wait, false
	return s.wrid[i], true, wake
}

func (s *devSRQSlots) isGone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

// grow makes room for n slots (a resized SRQ), allocating just that (the
// SRQ's footprint counts n slots).
func (s *devSRQSlots) grow(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	had := len(s.held)
	if n <= had {
		return
	}
	wrid, held, gen, free := make([]uint64, n), make([]bool, n), make([]uint16, n), make([]uint32, len(s.free), n)
	copy(wrid, s.wrid)
	copy(held, s.held)
	copy(gen, s.gen)
	copy(free, s.free)
	for i := had; i < n; i++ {
		free = append(free, uint32(i))
	}
	s.wrid, s.held, s.gen, s.free = wrid, held, gen, free
}

// len is the number of slots.
func (s *devSRQSlots) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// release forgets every receive held: the device discards an SRQ's
// receives when it is destroyed or goes away, completing none of them
// (an SRQ's receives are no QP's until one takes them, IBTA 10.2.9).
func (s *devSRQSlots) release() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i, h := range s.held {
		if h {
			s.held[i] = false
			s.free = append(s.free, uint32(i))
			n++
		}
	}
	s.gone = true
	return n
}

// srqDevice returns u's device as an SRQDevice, nil when it has none.
func (u *DeviceUplink) srqDevice() SRQDevice {
	d, _ := u.dev.(SRQDevice)
	return d
}

// PutOnDevice makes r, a basic SRQ of an adapter bound to a device, the
// device's: the SRQ of the device's size, its ring's notify word set so
// that the client rings after each post, and its runner started. The
// caller shares the doorbell (ShareDoorbell) with the client.
func (r *RQ) PutOnDevice() error {
	a := r.pd.adapter
	u, err := a.current()
	if err != nil {
		return err
	}
	sd := u.srqDevice()
	if sd == nil || r.xrcd != nil {
		return fmt.Errorf("adapter %s is on verbs uplink %s, which does not carry this SRQ: %w", a.Name, u.Name, ErrDeviceQP)
	}
	r.mu.Lock()
	entries := r.ring.Entries
	r.mu.Unlock()
	vs, err := sd.CreateSRQ(verbs.SRQAttr{MaxWR: uint32(entries), MaxSGE: uint32(min(r.maxSGE, verbs.MaxWRSGE))})
	if err != nil {
		return fmt.Errorf("an SRQ of %d entries on %s: %w", entries, u.Name, err)
	}
	bell, err := shm.NewDoorbell()
	if err != nil {
		_ = sd.DestroySRQ(vs)
		return err
	}
	d := &devSRQ{rq: r, u: u, dev: sd, srq: vs, bell: bell, done: make(chan struct{}),
		recvs: make([]verbs.RecvWR, 0, verbs.MaxBatch), sges: make([]verbs.SGE, verbs.MaxBatch*verbs.MaxWRSGE)}
	d.slots.init(min(entries, int(vs.Attr.MaxWR)))
	u.mu.Lock()
	if u.srqs == nil {
		u.srqs = map[uint32]*devSRQ{}
	}
	for {
		u.srqID = (u.srqID + 1) & 0xffff
		if u.srqs[u.srqID] == nil {
			break
		}
	}
	d.id = u.srqID
	u.srqs[d.id] = d
	u.mu.Unlock()
	r.mu.Lock()
	r.dev = d
	shm.Store32(r.mem, r.ring.Offset+abi.RingNotifyOff, 1)
	r.mu.Unlock()
	go r.runDevice()
	return nil
}

// ShareDoorbell returns a new write-only descriptor of a bound SRQ's
// doorbell for the client, -1 for an SRQ not on a device.
func (r *RQ) ShareDoorbell() (int, error) {
	if r.dev == nil {
		return -1, nil
	}
	return r.dev.bell.ShareWriter()
}

// OnDevice reports whether r is a device's SRQ.
func (r *RQ) OnDevice() bool { return r.dev != nil }

// runDevice is a bound SRQ's runner: it sleeps on the doorbell and hands
// what the client posted to the device. Its wait allocates nothing (no
// context to cancel): closeDevice sets stop and rings.
func (r *RQ) runDevice() {
	d := r.dev
	defer close(d.done)
	for {
		r.postToDevice()
		if d.bell.Wait(context.Background()) != nil || d.stop.Load() {
			return
		}
	}
}

// postToDevice forwards the posted receive requests to the device SRQ, up
// to a batch per message, as long as the table has free slots.
func (r *RQ) postToDevice() {
	d := r.dev
	if d.slots.isGone() {
		// The device went away or refused the SRQ: what the client posts
		// is taken and dropped, as a device SRQ in error keeps it unused.
		for res := r.pop(&d.wqe); res != popEmpty && res != popCorrupt; res = r.pop(&d.wqe) {
		}
		return
	}
	for {
		d.recvs = d.recvs[:0]
		nsge := 0
		for len(d.recvs) < verbs.MaxBatch {
			if !r.pendingLocked() {
				break
			}
			slot, ok := d.slots.take(0)
			if !ok {
				break // a completion frees one and rings
			}
			res := r.pop(&d.wqe)
			if res == popEmpty || res == popCorrupt {
				d.slots.give(slot)
				if res == popCorrupt {
					r.devFailed("the SRQ's producer index is corrupt")
					return
				}
				break
			}
			var sg []verbs.SGE
			ok = res == popOK
			if ok {
				sg, ok = r.pd.adapter.translateOnDevice(r.pd, d.wqe.SGL[:d.wqe.NumSGE], d.sges[nsge:nsge:len(d.sges)])
			}
			if !ok {
				// Memory the device does not have: as a device's SRQ
				// whose request is bad, the SRQ is in error.
				d.slots.give(slot)
				r.devFailed("a receive request names memory not registered with the device")
				return
			}
			d.slots.mu.Lock()
			d.slots.wrid[slot&0xffff] = d.wqe.WRID
			d.slots.mu.Unlock()
			nsge += len(sg)
			d.recvs = append(d.recvs, verbs.RecvWR{WRID: devSRQTag | uint64(d.id)<<32 | uint64(slot), SGEs: sg})
		}
		if len(d.recvs) == 0 {
			return
		}
		if err := d.dev.PostSRQRecv(d.srq, d.recvs); err != nil {
			for _, w := range d.recvs {
				d.slots.give(uint32(w.WRID))
			}
			r.devFailed("the device refused its receive requests: " + err.Error())
			return
		}
	}
}

// pendingLocked reports whether the client posted requests the runner
// has not taken.
func (r *RQ) pendingLocked() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mem != nil && shm.Load32(r.mem, r.ring.Offset+abi.RingProdOff) != r.cons
}

// devFailed tells the client its SRQ is in error (IBV_EVENT_SRQ_ERR); what
// it posts is no longer handed to the device.
func (r *RQ) devFailed(why string) {
	r.dev.slots.release()
	if r.Events != nil {
		r.Events.Event(abi.EventSRQErr, r.Handle, 0, why)
	}
}

// closeDevice stops a bound SRQ's runner and destroys the device's SRQ;
// the receives it held are released without completions, as a destroyed
// SRQ's are.
func (r *RQ) closeDevice() {
	d := r.dev
	if d == nil {
		return
	}
	d.stop.Store(true)
	d.bell.Signal()
	<-d.done
	d.bell.Close()
	d.slots.release()
	d.u.mu.Lock()
	if d.u.srqs[d.id] == d {
		delete(d.u.srqs, d.id)
	}
	d.u.mu.Unlock()
	_ = d.dev.DestroySRQ(d.srq)
}

// srqCompleted takes a completion of an SRQ receive, on the push reader:
// it frees the table's slot and puts the completion, with the client's ID,
// into cq in the name of the QP that received. It reports whether the
// completion named a receive the device holds and whether cq took it.
func (u *DeviceUplink) srqCompleted(w *verbs.WC, cq *CQ) (known, pushed bool) {
	u.mu.Lock()
	d := u.srqs[uint32(w.WRID>>32)&0xffff]
	u.mu.Unlock()
	if d == nil {
		return false, false
	}
	wrid, ok, wake := d.slots.give(uint32(w.WRID))
	if !ok {
		return false, false
	}
	c := abi.CQE{WRID: wrid, QPNum: w.QPN, ByteLen: w.ByteLen, Imm: w.Imm, SrcQP: w.SrcQP, SL: w.SL,
		Opcode: abi.WCOpcode(w.Opcode), Status: abi.Status(w.Status), Flags: abi.WCFlags(w.Flags) & (abi.WCWithImm | abi.WCWithInv | abi.WCWithGRH)}
	if c.Status != abi.StatusSuccess {
		c.Opcode = abi.WCRecv // the device's is undefined
	}
	pushed = cq.push(&c)
	if wake {
		d.bell.Signal()
	}
	return true, pushed
}

// flushSRQs releases what the device's SRQs held, as it went away.
func (u *DeviceUplink) flushSRQs() {
	u.mu.Lock()
	ds := make([]*devSRQ, 0, len(u.srqs))
	for _, d := range u.srqs {
		ds = append(ds, d)
	}
	u.mu.Unlock()
	for _, d := range ds {
		d.slots.release()
	}
}

// srqByHandle returns the engine SRQ whose device SRQ the helper knows by
// handle h, for its async events.
func (u *DeviceUplink) srqByHandle(h uint32) *devSRQ {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, d := range u.srqs {
		if d.srq.Handle == h {
			return d
		}
	}
	return nil
}

// srqQPCompleted does for the QP that received an SRQ completion what a
// completion does to a device QP: an error completion (other than a flush)
// moves it to ERR with the device's, as does a CQ that overflowed.
func (u *DeviceUplink) srqQPCompleted(w *verbs.WC, overflow bool) {
	u.mu.Lock()
	q := u.qps[w.QPN]
	u.mu.Unlock()
	if q == nil || q.dev == nil {
		return
	}
	if overflow {
		q.Fail(abi.EventQPFatal, "its completion queue overflowed")
		return
	}
	if st := abi.Status(w.Status); st != abi.StatusSuccess && st != abi.StatusWRFlushErr {
		q.devErr.Store(true)
		q.enterError()
	}
}
