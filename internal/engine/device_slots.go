package engine

// The slots of a device QP's rings (device_qp.go). A send slot stays the
// client's request until the device completes it, as a send queue's depth
// counts outstanding requests (IBTA 10.8.3): the free index the client
// reads (the send ring's consumer word) is written here and nowhere else
// for a bound QP, under devSlots.mu, and always before the completion that
// frees it is in the CQ, so a client that posts again on seeing a
// completion finds its slot free.
//
// The device knows each request by a work request ID of the engine's (a
// tag and the request's index), not the client's: a completion names the
// ring and the index it frees even when its opcode is undefined (a failed
// completion's), and the client's ID comes back from the table here.
//
// This is the one record of what the device holds: a device that goes
// away (device_fault.go) flushes exactly the indexes still held here, under
// the same lock a completion takes, so each request completes once.

import (
	"sync"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
)

const (
	devSendTag = uint64(0x5344) << 48 // "SD": a send, its index in the low 32 bits
	devRecvTag = uint64(0x5256) << 48 // "RV": a receive, likewise
	devTagMask = uint64(0xffff) << 48
)

// devSlots is what the engine remembers of the requests the device holds.
type devSlots struct {
	mu sync.Mutex
	// Sends, by index & (len-1): the client's ID and opcode.
	swrid []uint64
	sop   []abi.Opcode
	// Indexes of the send ring: freed <= devEnd <= posted (mod 2^32).
	// Before freed the slots are the client's again; [freed, devEnd) the
	// device holds; [devEnd, posted) the engine completed itself (a
	// request it could not post, after which the QP is in ERR and nothing
	// more goes to the device until RESET) and frees once the device has
	// completed everything before them.
	freed, devEnd, posted uint32
	// Receives the device holds, by index & (len-1).
	rwrid           []uint64
	rfreed, rposted uint32
	// The device went away: what it held was flushed, and a completion
	// arriving later is dropped (devQP.flushHeld).
	gone bool
	// The runner stopped for want of room (a client that posted past the
	// free index); a completion that makes room wakes it.
	swait, rwait atomic.Bool
}

func newDevSlots(sq, rq int) devSlots {
	return devSlots{swrid: make([]uint64, sq), sop: make([]abi.Opcode, sq), rwrid: make([]uint64, max(rq, 1))}
}

// sendRoom is how many more sends the runner may hand the device, the
// ring consumed up to cons: the table holds one per slot of the ring.
func (d *devSlots) sendRoom(cons uint32) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	room := len(d.swrid) - int(cons-d.freed)
	if room <= 0 {
		d.swait.Store(true)
		return 0
	}
	return room
}

// recvRoom is how many more receives the runner may hand the device.
func (d *devSlots) recvRoom() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	room := len(d.rwrid) - int(d.rposted-d.rfreed)
	if room <= 0 {
		d.rwait.Store(true)
		return 0
	}
	return room
}

// noteSend records the client's ID and opcode of send index i, and returns
// the ID the device is given. The runner's; the table entry is read only
// after handSends publishes it.
func (d *devSlots) noteSend(i uint32, wrid uint64, op abi.Opcode) uint64 {
	m := uint32(len(d.swrid) - 1)
	d.swrid[i&m], d.sop[i&m] = wrid, op
	return devSendTag | uint64(i)
}

// noteRecv records the client's ID of the next receive (n after those
// posted) and returns the ID the device is given.
func (d *devSlots) noteRecv(n int, wrid uint64) uint64 {
	i := d.rposted + uint32(n)
	d.rwrid[i&uint32(len(d.rwrid)-1)] = wrid
	return devRecvTag | uint64(i)
}

// handSends says the sends before end go to the device.
func (d *devSlots) handSends(end uint32) {
	d.mu.Lock()
	d.devEnd, d.posted = end, end
	d.mu.Unlock()
}

// unhandSends says the sends from start on did not reach the device after
// all: the engine completes them.
func (d *devSlots) unhandSends(start uint32) {
	d.mu.Lock()
	d.devEnd = start
	d.mu.Unlock()
}

// handRecvs says n more receives go to the device.
func (d *devSlots) handRecvs(n int) {
	d.mu.Lock()
	d.rposted += uint32(n)
	d.mu.Unlock()
}

// unhandRecvs says the last n receives handed did not reach the device
// (the post failed whole): the engine completes them.
func (d *devSlots) unhandRecvs(n int) {
	d.mu.Lock()
	d.rposted -= uint32(n)
	d.mu.Unlock()
}

// flushHeld completes every request the device holds with
// IBV_WC_WR_FLUSH_ERR (unsignaled sends too: the device will say nothing
// more of them), frees their slots, and drops any completion the device
// gives later. The sends are [freed, devEnd), the receives [rfreed,
// rposted).
func (d *devQP) flushHeld() {
	q, s := d.q, &d.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = true
	start, end := s.freed, s.devEnd
	s.freed = end
	if s.freed == s.devEnd {
		s.freed, s.devEnd = s.posted, s.posted
	}
	q.storeFree(abi.RingConsOff, s.freed)
	m := uint32(len(s.swrid) - 1)
	for i := start; i != end; i++ {
		c := abi.CQE{WRID: s.swrid[i&m], QPNum: q.qpn, Opcode: s.sop[i&m].CompletionOpcode(), Status: abi.StatusWRFlushErr}
		q.sendCQ.push(&c)
	}
	q.storeFree(abi.SQDoneOff, s.freed)
	rm := uint32(len(s.rwrid) - 1)
	for i := s.rfreed; i != s.rposted; i++ {
		c := abi.CQE{WRID: s.rwrid[i&rm], QPNum: q.qpn, Opcode: abi.WCRecv, Status: abi.StatusWRFlushErr}
		q.recvCQ.push(&c)
	}
	s.rfreed = s.rposted
	s.swait.Store(false)
	s.rwait.Store(false)
}

// engineDone is publishSQCons for a bound QP: the requests before
// q.sqCons the engine consumed; those it completed itself are free once
// the device holds nothing before them.
func (d *devQP) engineDone() {
	q, s := d.q, &d.slots
	s.mu.Lock()
	s.posted = q.sqCons
	if s.freed == s.devEnd {
		s.freed, s.devEnd = s.posted, s.posted
	}
	q.storeFree(abi.RingConsOff, s.freed)
	s.mu.Unlock()
}

// sqDone is publishSQDone for a bound QP.
func (d *devQP) sqDone() {
	q, s := d.q, &d.slots
	s.mu.Lock()
	q.storeFree(abi.SQDoneOff, s.freed)
	s.mu.Unlock()
}

// reset forgets what the device held (a QP moved to RESET: the device
// discards it without completions); the send ring starts at cons.
func (d *devSlots) reset(cons uint32) {
	d.mu.Lock()
	d.freed, d.devEnd, d.posted = cons, cons, cons
	d.rfreed = d.rposted
	d.mu.Unlock()
}

// storeFree writes a word of the QP's shared header; the push reader
// calls it too, so it is guarded against release.
func (q *QP) storeFree(off int, v uint32) {
	q.memMu.Lock()
	if q.mem != nil {
		shm.Store32(q.mem, off, v)
	}
	q.memMu.Unlock()
}

// completed takes a completion the device gave for one of q's
// requests, on the push reader: it frees the request's slot (and, for a
// send, those of the unsignaled requests before it), then puts the
// completion, with the client's ID, into cq. It reports whether the
// completion named a request the device holds and whether cq took it.
func (d *devQP) completed(w *verbs.WC, cq *CQ) (known, pushed bool) {
	q, s := d.q, &d.slots
	c := abi.CQE{QPNum: w.QPN, ByteLen: w.ByteLen, Imm: immFromDevice(w), SrcQP: w.SrcQP, SL: w.SL,
		Opcode: abi.WCOpcode(w.Opcode), Status: abi.Status(w.Status), Flags: abi.WCFlags(w.Flags) & (abi.WCWithImm | abi.WCWithInv | abi.WCWithGRH)}
	i := uint32(w.WRID)
	wake := false
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		return false, false // flushed already
	}
	switch w.WRID & devTagMask {
	case devSendTag:
		if i-s.freed >= s.devEnd-s.freed {
			s.mu.Unlock()
			return false, false
		}
		m := uint32(len(s.swrid) - 1)
		c.WRID = s.swrid[i&m]
		if c.Status != abi.StatusSuccess {
			c.Opcode = s.sop[i&m].CompletionOpcode() // the device's is undefined
		}
		s.freed = i + 1
		if s.freed == s.devEnd {
			s.freed, s.devEnd = s.posted, s.posted
		}
		q.storeFree(abi.RingConsOff, s.freed)
		pushed = cq.push(&c)
		q.storeFree(abi.SQDoneOff, s.freed)
		wake = s.swait.Swap(false)
	case devRecvTag:
		if i-s.rfreed >= s.rposted-s.rfreed {
			s.mu.Unlock()
			return false, false
		}
		c.WRID = s.rwrid[i&uint32(len(s.rwrid)-1)]
		if c.Status != abi.StatusSuccess {
			c.Opcode = abi.WCRecv
		}
		s.rfreed = i + 1
		pushed = cq.push(&c)
		wake = s.rwait.Swap(false)
	default:
		s.mu.Unlock()
		return false, false
	}
	s.mu.Unlock()
	if wake {
		q.kickWorker()
	}
	if c.Status != abi.StatusSuccess && c.Status != abi.StatusWRFlushErr {
		// The device's QP is in ERR; so is the instance's, and the rest
		// of what it posts is flushed.
		q.devErr.Store(true)
		q.enterError()
	}
	return true, pushed
}
