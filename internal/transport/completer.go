package transport

// The completer: ACKs, NAKs, READ responses and atomic ACKs turn into
// completions, in order and exactly once.

import (
	"encoding/binary"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

func (q *QP) complete(env Env, p *wire.Packet, now int64) {
	r := &q.req
	psn := p.PSN
	// A response for a PSN never sent is stray.
	if r.head == r.next && r.off == 0 || psnDiff(psn, r.psn) >= 0 {
		env.Drop(DropResponse)
		return
	}
	op := p.Opcode.Op()
	switch {
	case op == wire.OpAcknowledge:
		switch wire.SyndromeKind(p.AETH.Syndrome) {
		case 0: // ACK
			q.ackThrough(env, psn, true, now)
		case 1: // RNR NAK
			q.ackThrough(env, psnAdd(psn, psnMask), false, now) // everything before psn
			q.rnr(env, psn, p.AETH.Syndrome&0x1f, now)
		case 3:
			q.nak(env, p, now)
		default:
			env.Drop(DropResponse)
		}
	case p.Opcode.Flags()&wire.IsRead != 0:
		q.readResponse(env, p, now)
	case op == wire.OpAtomicAcknowledge:
		q.atomicAck(env, p, now)
	default:
		env.Drop(DropResponse)
	}
	if !q.err {
		q.pump(env, now)
	}
}

// ackThrough completes the SEND and WRITE requests whose last PSN is at or
// before psn. A READ or atomic in the way that has not had its response
// means the response was lost: when explicit, the requester retries it.
func (q *QP) ackThrough(env Env, psn uint32, explicit bool, now int64) {
	r := &q.req
	progressed := false
	// Only requests sent whole, [head, next), can be acknowledged whole.
	for r.head != r.next {
		w := r.at(r.head)
		if psnDiff(w.LastPSN(), psn) > 0 {
			break
		}
		if w.readOrAtomic() {
			if explicit {
				// Responses precede the ACK of anything later: they were lost.
				q.retry(env, now, psnAdd(w.firstPSN, w.resp), RetryImplied)
			}
			return
		}
		r.head++
		progressed = true
		env.Complete(w, abi.StatusSuccess)
	}
	if psnDiff(psnAdd(psn, 1), r.ackPSN) > 0 {
		r.ackPSN = psnAdd(psn, 1)
		progressed = true
	}
	if progressed {
		q.progress(now)
	}
}

// progress resets the retry budgets and restarts the retransmit timer
// after the peer acknowledged something.
func (q *QP) progress(now int64) {
	r := &q.req
	r.retryCnt = int(q.cfg.RetryCnt)
	r.rnrLeft = int(q.cfg.RNRRetry)
	r.timerAt = 0
	if (r.head != r.tail && r.at(r.head).started) && q.cfg.Timeout != 0 {
		r.timerAt = now + abi.AckTimeout(q.cfg.Timeout)
	}
}

// rnr handles an RNR NAK for psn: wait the timer the responder named, then
// send again from psn, spending one of rnr_retry (7: for ever).
func (q *QP) rnr(env Env, psn uint32, timer uint8, now int64) {
	r := &q.req
	env.RNR()
	if q.cfg.RNRRetry != 7 {
		if r.rnrLeft == 0 {
			q.completeHeadError(env, abi.StatusRNRRetryExcErr, "the RNR retry count was exceeded: the peer posted no receive")
			return
		}
		r.rnrLeft--
	}
	if !q.rewind(env, psn, RetryRNR) {
		return
	}
	r.lastNAK, r.nakValid = psn, true
	r.timerAt = 0
	r.rnrUntil = now + abi.RNRTimer(timer)
	if r.rnrUntil == 0 {
		r.rnrUntil = 1
	}
}

// nak handles a NAK: a sequence error sends again from its PSN; the others
// complete the request at that PSN with the matching error.
func (q *QP) nak(env Env, p *wire.Packet, now int64) {
	psn := p.PSN
	q.ackThrough(env, psnAdd(psn, psnMask), false, now)
	var st abi.Status
	switch p.AETH.Syndrome {
	case wire.SyndromeNAKSeq:
		q.retry(env, now, psn, RetryNAK)
		return
	case wire.SyndromeNAKInvReq:
		st = abi.StatusRemInvReqErr
	case wire.SyndromeNAKAccess:
		st = abi.StatusRemAccessErr
	case wire.SyndromeNAKOpError:
		st = abi.StatusRemOpErr
	default:
		st = abi.StatusBadRespErr
	}
	q.completeHeadError(env, st, "the responder NAKed the request: "+st.String())
}

// readResponse places one READ response packet. Responses arrive in order;
// a gap means some were lost, and the requester asks again for the rest.
func (q *QP) readResponse(env Env, p *wire.Packet, now int64) {
	r := &q.req
	q.ackThrough(env, psnAdd(p.PSN, psnMask), false, now)
	if r.head == r.tail {
		env.Drop(DropResponse)
		return
	}
	w := r.at(r.head)
	if w.Op == abi.OpAtomicWrite {
		q.atomicWriteAck(env, w, p, now)
		return
	}
	if w.Op != abi.OpRDMARead || !w.started {
		env.Drop(DropResponse)
		return
	}
	expect := psnAdd(w.firstPSN, w.resp)
	d := psnDiff(p.PSN, expect)
	if d < 0 {
		env.Drop(DropDuplicate)
		return
	}
	if d > 0 {
		q.retry(env, now, expect, RetryNAK)
		return
	}
	last := p.Opcode.Flags()&wire.IsLast != 0
	off := w.resp * q.cfg.MTU
	n := uint32(len(p.Payload))
	remaining := w.Length - off
	// Each response but the last carries exactly one MTU. Whether the
	// packet says FIRST or MIDDLE depends on which request (the original or
	// a retry for the rest) it answers; either brings the same bytes.
	ok := last && n == remaining || !last && n == q.cfg.MTU && remaining > q.cfg.MTU
	if !ok {
		q.completeHeadError(env, abi.StatusBadRespErr, "a READ response of the wrong opcode or length")
		return
	}
	scatterAt(w.Local, int(off), p.Payload)
	w.resp++
	if psnDiff(psnAdd(p.PSN, 1), r.ackPSN) > 0 {
		r.ackPSN = psnAdd(p.PSN, 1)
	}
	if last {
		r.head++
		r.rdOut--
		env.Complete(w, abi.StatusSuccess)
	}
	q.progress(now)
}

// atomicWriteAck completes the ATOMIC WRITE w at the head with the empty
// READ Response Only that answers it; any other response is stray.
func (q *QP) atomicWriteAck(env Env, w *WQE, p *wire.Packet, now int64) {
	r := &q.req
	if !w.started || w.firstPSN != p.PSN {
		env.Drop(DropResponse)
		return
	}
	if p.Opcode.Op() != wire.OpReadResponseOnly || len(p.Payload) != 0 {
		q.completeHeadError(env, abi.StatusBadRespErr, "an ATOMIC WRITE answered by a READ response that is not an empty ONLY")
		return
	}
	r.head++
	r.rdOut--
	if psnDiff(psnAdd(p.PSN, 1), r.ackPSN) > 0 {
		r.ackPSN = psnAdd(p.PSN, 1)
	}
	env.Complete(w, abi.StatusSuccess)
	q.progress(now)
}

// atomicAck completes the atomic at the head with the original value.
func (q *QP) atomicAck(env Env, p *wire.Packet, now int64) {
	r := &q.req
	q.ackThrough(env, psnAdd(p.PSN, psnMask), false, now)
	if r.head == r.tail {
		env.Drop(DropResponse)
		return
	}
	w := r.at(r.head)
	if !w.Op.IsAtomic() || !w.started || w.firstPSN != p.PSN {
		env.Drop(DropResponse)
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], p.AtomicAck) // host order, as the CPU would have read it
	scatterAt(w.Local, 0, b[:])
	r.head++
	r.rdOut--
	if psnDiff(psnAdd(p.PSN, 1), r.ackPSN) > 0 {
		r.ackPSN = psnAdd(p.PSN, 1)
	}
	env.Complete(w, abi.StatusSuccess)
	q.progress(now)
}

// scatterAt copies src into the concatenation of spans from byte off on.
func scatterAt(spans [][]byte, off int, src []byte) int {
	n := 0
	for _, s := range spans {
		if len(src) == 0 {
			break
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		c := copy(s[off:], src)
		src = src[c:]
		n += c
		off = 0
	}
	return n
}

// Gather copies n bytes of the concatenation of spans, from byte off on,
// into dst, and returns dst extended by them. Env implementations use it
// to build a packet's payload.
func Gather(dst []byte, spans [][]byte, off, n int) []byte {
	for _, s := range spans {
		if n == 0 {
			break
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		s = s[off:]
		if len(s) > n {
			s = s[:n]
		}
		dst = append(dst, s...)
		n -= len(s)
		off = 0
	}
	return dst
}
