package engine

// Running a send queue: one step at a time, stalls for RNR and retries,
// and the flush of a QP in the error state.

import (
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
)

// outcome is what executing one send work request came to.
type outcome struct {
	status abi.Status
	bytes  uint32
	stall  stallKind
	rnr    uint8 // stallRNR: the responder's min_rnr_timer, which its NAK carries
}

type stallKind uint8

const (
	noStall     stallKind = iota
	stallRNR              // the responder had no receive posted
	stallNoPeer           // nothing answered: the transport would time out
)

var nanotimeBase = time.Now()

func nanotime() int64 { return int64(time.Since(nanotimeBase)) }

// step runs the QP once, under procMu. It returns how long the QP is
// stalled (0 when idle or done) and whether it did any work.
func (q *QP) step() (time.Duration, bool) {
	q.procMu.Lock()
	defer q.procMu.Unlock()
	if q.dead {
		return 0, false
	}
	q.kick.Store(false)
	if until := q.stallUntil.Load(); until != 0 && q.State() != abi.QPStateErr {
		if now := nanotime(); now < until {
			return time.Duration(until - now), false
		}
		q.stallUntil.Store(0)
	}
	return q.process()
}

// hasWork reports, without locks, whether step would do anything now. It
// compares the client's producer words with the daemon's own consumer
// counts, never with the shared consumer words, which a client may
// overwrite: a scribbled index must not make the daemon spin.
func (q *QP) hasWork() bool {
	if q.kick.Load() {
		return true
	}
	if until := q.stallUntil.Load(); until != 0 {
		return nanotime() >= until // a stalled request has work when its timer is due
	}
	if d := q.wireDeadline.Load(); d != 0 && nanotime() >= d {
		return true // the transport's timer is due
	}
	mem := q.mem
	if mem == nil || q.xrc == xrcTGT {
		return false // a target has no send queue: what a client writes there is ignored
	}
	if q.dev != nil {
		return q.dev.hasWork(mem)
	}
	switch q.State() {
	case abi.QPStateRTS:
		return shm.Load32(mem, abi.RingProdOff) != q.sqConsPub.Load()
	case abi.QPStateErr:
		// A QP in ERR flushes what is posted after it got there.
		return shm.Load32(mem, abi.RingProdOff) != q.sqConsPub.Load() || (!q.srq && q.rq.pending(mem))
	}
	return false
}

func (q *QP) process() (time.Duration, bool) {
	st := q.State()
	if q.xrc == xrcTGT {
		return q.processTarget(st)
	}
	if q.dev != nil {
		return q.dev.process(st)
	}
	switch st {
	case abi.QPStateErr:
		return 0, q.flush()
	case abi.QPStateRTS:
		if q.rm != nil && q.rm.wired {
			d, worked := q.rm.process()
			if d == 0 {
				return 0, worked
			}
			return time.Duration(max(d-nanotime(), 1)), worked
		}
	case abi.QPStateRTR:
		if q.rm != nil && q.rm.wired {
			return q.rm.tick() // a responder's READ responses waiting for the link
		}
		return 0, false
	default:
		return 0, false // the send queue only runs in RTS
	}
	worked := false
	for {
		prod := shm.Load32(q.mem, abi.RingProdOff)
		n, err := q.sq.Pending(prod, q.sqCons)
		if err != nil {
			q.Fail(abi.EventQPFatal, "the send queue's producer index is corrupt")
			return 0, true
		}
		if n == 0 || q.State() != abi.QPStateRTS {
			return 0, worked
		}
		worked = true
		s := &q.s
		off := q.sq.Entry(q.sqCons)
		copy(s.entry, q.mem[off:off+q.sq.Stride])
		var out outcome
		if perr := abi.ParseSendWQE(s.entry, &s.wqe, q.typ, q.caps.MaxSendSGE, q.caps.MaxInlineData); perr != nil {
			out.status = abi.StatusLocQPOpErr
			if perr == abi.ErrInlineLen {
				out.status = abi.StatusLocLenErr
			}
		} else {
			out = q.execute(&s.wqe)
			s.releaseAll()
		}
		if out.stall != noStall {
			if wait, ok := q.stall(out.stall, out.rnr); ok {
				return wait, true
			}
			out.status = abi.StatusRetryExcErr
			if out.stall == stallRNR {
				out.status = abi.StatusRNRRetryExcErr
			}
		}
		q.stallLeft = -1
		q.sqCons++
		q.publishSQCons()
		if out.status != abi.StatusSuccess {
			// The QP is in ERR before its error completion is seen: a
			// client that queries the QP on seeing it finds ERR. This worker
			// flushes the rest after it returns, so the completion still
			// comes first.
			q.adapter.Counters.TxErrors.Add(1)
			q.enterError()
		}
		if out.status != abi.StatusSuccess || q.sigAll || s.wqe.Flags&abi.SendSignaled != 0 {
			c := abi.CQE{WRID: s.wqe.WRID, QPNum: q.qpn, Opcode: s.wqe.Opcode.CompletionOpcode(), Status: out.status, ByteLen: out.bytes}
			if !q.sendCQ.push(&c) {
				q.Fail(abi.EventQPFatal, "its send completion queue overflowed")
				q.publishSQDone()
				return 0, true
			}
		}
		q.publishSQDone()
		if out.status != abi.StatusSuccess {
			return 0, true
		}
	}
}

// stall arms the retry timer for the WQE at the head of the send queue. It
// returns false when the retry budget (rnr_retry or retry_cnt) is spent:
// a budget of n allows n retries after the first attempt, so 0 fails on the
// first RNR NAK or timeout (IBTA 9.7.5.2.8, 9.7.6.1.3; rxe's completer).
func (q *QP) stall(k stallKind, rnrTimer uint8) (time.Duration, bool) {
	d := q.dp.Load()
	if k == stallRNR {
		q.adapter.Counters.RNRNaks.Add(1)
	}
	if q.stallLeft < 0 || q.stallRNR != (k == stallRNR) {
		q.stallRNR = k == stallRNR
		if k == stallRNR {
			q.stallLeft = int(d.rnrRetry)
		} else {
			q.stallLeft = int(d.retryCnt)
		}
	}
	// rnr_retry 7 retries for ever; timeout 0 waits for ever for an answer.
	forever := (k == stallRNR && d.rnrRetry == 7) || (k == stallNoPeer && d.timeout == 0)
	if !forever {
		if q.stallLeft == 0 {
			return 0, false
		}
		q.stallLeft--
	}
	var wait time.Duration
	if k == stallRNR {
		wait = time.Duration(abi.RNRTimer(rnrTimer))
	} else {
		wait = time.Duration(abi.AckTimeout(d.timeout))
		if wait == 0 {
			wait = time.Second // timeout 0: wait for ever, looking once a second
		}
	}
	q.stallUntil.Store(nanotime() + int64(wait))
	return wait, true
}

// flush completes every outstanding request of a QP in ERR with WR_FLUSH_ERR.
func (q *QP) flush() bool {
	worked := false
	if rm := q.rm; rm != nil {
		// Requests the transport holds complete first, in order.
		worked = rm.tp.Flush(rm)
		releaseAll(&rm.callHeld)
		q.wireDeadline.Store(0)
	}
	prod := shm.Load32(q.mem, abi.RingProdOff)
	n, err := q.sq.Pending(prod, q.sqCons)
	if q.xrc == xrcTGT {
		n, err = 0, nil // no send queue, no send CQ
	}
	if err != nil {
		n = 0
		q.sqCons = prod
		q.publishSQCons()
		q.publishSQDone()
	}
	s := &q.s
	for ; n > 0; n-- {
		off := q.sq.Entry(q.sqCons)
		copy(s.entry, q.mem[off:off+q.sq.Stride])
		_ = abi.ParseSendWQE(s.entry, &s.wqe, q.typ, q.caps.MaxSendSGE, q.caps.MaxInlineData)
		q.sqCons++
		q.publishSQCons()
		c := abi.CQE{WRID: s.wqe.WRID, QPNum: q.qpn, Opcode: s.wqe.Opcode.CompletionOpcode(), Status: abi.StatusWRFlushErr}
		q.sendCQ.push(&c)
		q.publishSQDone()
		worked = true
	}
	q.stallUntil.Store(0)
	q.stallLeft = -1
	if q.srq {
		return worked
	}
	for {
		r := q.rq.pop(&s.rwqe)
		if r == popEmpty || r == popCorrupt {
			return worked
		}
		c := abi.CQE{WRID: s.rwqe.WRID, QPNum: q.qpn, Opcode: abi.WCRecv, Status: abi.StatusWRFlushErr}
		q.recvCQ.push(&c)
		worked = true
	}
}

// processTarget runs an XRC target QP, which has no send queue: its
// transport's timers (READ responses waiting for the link) and, in ERR,
// the flush of what its transport holds.
func (q *QP) processTarget(st abi.QPState) (time.Duration, bool) {
	switch st {
	case abi.QPStateErr:
		return 0, q.flush()
	case abi.QPStateRTR, abi.QPStateRTS:
		if q.rm != nil && q.rm.wired {
			return q.rm.tick()
		}
	}
	return 0, false
}
