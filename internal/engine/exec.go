package engine

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

// hasWork reports, without locks, whether step would do anything now.
func (q *QP) hasWork() bool {
	if q.kick.Load() {
		return true
	}
	if q.stallUntil.Load() != 0 {
		return true
	}
	mem := q.mem
	if mem == nil {
		return false
	}
	if shm.Load32(mem, abi.RingProdOff) != shm.Load32(mem, abi.RingConsOff) {
		return true
	}
	// A QP in ERR flushes receives posted after it got there.
	off := q.rqRing.Offset
	return !q.srq && q.State() == abi.QPStateErr &&
		shm.Load32(mem, off+abi.RingProdOff) != shm.Load32(mem, off+abi.RingConsOff)
}

func (q *QP) process() (time.Duration, bool) {
	st := q.State()
	switch st {
	case abi.QPStateErr:
		return 0, q.flush()
	case abi.QPStateRTS:
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
		shm.Store32(q.mem, abi.RingConsOff, q.sqCons)
		if out.status != abi.StatusSuccess || q.sigAll || s.wqe.Flags&abi.SendSignaled != 0 {
			c := abi.CQE{WRID: s.wqe.WRID, QPNum: q.qpn, Opcode: s.wqe.Opcode.CompletionOpcode(), Status: out.status, ByteLen: out.bytes}
			if !q.sendCQ.push(&c) {
				q.Fail(abi.EventQPFatal, "its send completion queue overflowed")
				return 0, true
			}
		}
		if out.status != abi.StatusSuccess {
			q.adapter.Counters.TxErrors.Add(1)
			q.enterError()
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
	prod := shm.Load32(q.mem, abi.RingProdOff)
	n, err := q.sq.Pending(prod, q.sqCons)
	if err != nil {
		n = 0
		q.sqCons = prod
		shm.Store32(q.mem, abi.RingConsOff, q.sqCons)
	}
	s := &q.s
	for ; n > 0; n-- {
		off := q.sq.Entry(q.sqCons)
		copy(s.entry, q.mem[off:off+q.sq.Stride])
		_ = abi.ParseSendWQE(s.entry, &s.wqe, q.typ, q.caps.MaxSendSGE, q.caps.MaxInlineData)
		q.sqCons++
		shm.Store32(q.mem, abi.RingConsOff, q.sqCons)
		c := abi.CQE{WRID: s.wqe.WRID, QPNum: q.qpn, Opcode: s.wqe.Opcode.CompletionOpcode(), Status: abi.StatusWRFlushErr}
		q.sendCQ.push(&c)
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

// execute runs one validated send work request.
func (q *QP) execute(w *abi.SendWQE) outcome {
	if q.typ == abi.QPTypeUD {
		return q.executeUD(w)
	}
	s := &q.s
	d := q.dp.Load()
	a := q.adapter

	// Local checks first: they fail whatever the responder would say.
	var local [][]byte
	var total uint64
	status := abi.StatusSuccess
	switch {
	case w.Inline != nil:
		s.src[0] = w.Inline
		local, total = s.src[:1], uint64(len(w.Inline))
	case w.Opcode == abi.OpRDMARead:
		local, total, status = s.resolve(a, q.pd, w.SGL[:w.NumSGE], abi.AccessLocalWrite, s.dst[:0])
	case w.Opcode.IsAtomic():
		if w.NumSGE != 1 || w.SGL[0].Length != 8 {
			return outcome{status: abi.StatusLocLenErr}
		}
		local, total, status = s.resolve(a, q.pd, w.SGL[:1], abi.AccessLocalWrite, s.dst[:0])
	default:
		local, total, status = s.resolve(a, q.pd, w.SGL[:w.NumSGE], 0, s.src[:0])
	}
	if status != abi.StatusSuccess {
		return outcome{status: status}
	}

	peer := q.peer(d)
	if peer == nil {
		if q.typ == abi.QPTypeUC {
			return outcome{bytes: uint32(total)} // unreliable: the message is simply lost
		}
		return outcome{stall: stallNoPeer}
	}
	out := q.respond(peer, w, local, total)
	if q.typ == abi.QPTypeUC && out.status != abi.StatusSuccess && !isLocal(out.status) {
		// A UC responder drops a bad message silently; the requester never knows.
		peer.adapter.Counters.RxDrops.Add(1)
		return outcome{bytes: uint32(total)}
	}
	if out.status == abi.StatusSuccess && out.stall == noStall {
		a.Counters.PathMemcpy.Add(1)
		a.Counters.TxPackets.Add(1)
		peer.adapter.Counters.RxPackets.Add(1)
		if w.Opcode == abi.OpRDMARead || w.Opcode.IsAtomic() {
			a.Counters.RxBytes.Add(uint64(out.bytes))
			peer.adapter.Counters.TxBytes.Add(uint64(out.bytes))
		} else {
			a.Counters.TxBytes.Add(uint64(out.bytes))
			peer.adapter.Counters.RxBytes.Add(uint64(out.bytes))
		}
	}
	return out
}

func isLocal(s abi.Status) bool {
	return s == abi.StatusLocLenErr || s == abi.StatusLocProtErr || s == abi.StatusLocQPOpErr
}

// peer resolves an RC/UC QP's destination to a local QP that would accept
// its packets: the right type, a state that receives, and (RC) connected
// back to q. Anything else is a QP no packet would reach.
func (q *QP) peer(d *dataAttrs) *QP {
	h := q.adapter.host
	if h == nil {
		return nil
	}
	p := h.LookupQP(d.dgid, d.dqpn)
	if p == nil || p.typ != q.typ {
		return nil
	}
	switch p.State() {
	case abi.QPStateRTR, abi.QPStateRTS, abi.QPStateSQD, abi.QPStateSQE:
	default:
		return nil
	}
	pd := p.dp.Load()
	if pd.dqpn != q.qpn {
		return nil
	}
	for _, g := range q.adapter.GIDs {
		if g == pd.dgid {
			return p
		}
	}
	return nil
}

// respond performs the responder's half of an RC/UC operation on peer p,
// in the order rxe checks: opcode against the QP's access flags, receive
// resources (RNR), length, rkey; then the copy and the completions.
func (q *QP) respond(p *QP, w *abi.SendWQE, local [][]byte, total uint64) outcome {
	s := &q.s
	pd := p.dp.Load()
	var need abi.Access
	switch {
	case w.Opcode == abi.OpRDMAWrite || w.Opcode == abi.OpRDMAWriteImm:
		need = abi.AccessRemoteWrite
	case w.Opcode == abi.OpRDMARead:
		need = abi.AccessRemoteRead
	case w.Opcode.IsAtomic():
		need = abi.AccessRemoteAtomic
	}
	if pd.access&need != need {
		return q.responderError(p, abi.StatusRemInvReqErr, abi.EventQPReqErr, "the QP's access flags do not allow "+w.Opcode.String())
	}
	consumesRecv := w.Opcode == abi.OpSend || w.Opcode == abi.OpSendImm || w.Opcode == abi.OpRDMAWriteImm
	if consumesRecv && p.rq.empty() {
		if q.typ == abi.QPTypeUC {
			p.adapter.Counters.RxDrops.Add(1)
			return outcome{bytes: uint32(total)}
		}
		return outcome{stall: stallRNR, rnr: pd.minRNRTimer}
	}

	switch w.Opcode {
	case abi.OpRDMAWrite, abi.OpRDMAWriteImm:
		if total > 0 {
			dst := s.remote(p.adapter, p.pd, w.RKey, w.RemoteAddr, uint32(total), abi.AccessRemoteWrite)
			if dst == nil {
				return q.responderError(p, abi.StatusRemAccessErr, abi.EventQPAccessErr, "RDMA WRITE with an rkey, range or access that the region does not grant")
			}
			s.dst[0] = dst
			scatter(s.dst[:1], local)
		}
		if w.Opcode == abi.OpRDMAWrite {
			return outcome{bytes: uint32(total)}
		}
		return q.deliverRecv(p, nil, total, w.Imm, abi.WCRecvRDMAImm)

	case abi.OpSend, abi.OpSendImm:
		return q.deliverRecv(p, local, total, w.Imm, abi.WCRecv)

	case abi.OpRDMARead:
		if total > 0 {
			src := s.remote(p.adapter, p.pd, w.RKey, w.RemoteAddr, uint32(total), abi.AccessRemoteRead)
			if src == nil {
				return q.responderError(p, abi.StatusRemAccessErr, abi.EventQPAccessErr, "RDMA READ with an rkey, range or access that the region does not grant")
			}
			s.src[0] = src
			scatter(local, s.src[:1])
		}
		return outcome{bytes: uint32(total)}

	default: // atomics
		if w.RemoteAddr%8 != 0 {
			return q.responderError(p, abi.StatusRemInvReqErr, abi.EventQPReqErr, "atomic on an address that is not 8-byte aligned")
		}
		tgt := s.remote(p.adapter, p.pd, w.RKey, w.RemoteAddr, 8, abi.AccessRemoteAtomic)
		if tgt == nil {
			return q.responderError(p, abi.StatusRemAccessErr, abi.EventQPAccessErr, "atomic with an rkey, range or access that the region does not grant")
		}
		if !shm.Aligned8(tgt, 0) {
			return q.responderError(p, abi.StatusRemInvReqErr, abi.EventQPReqErr, "atomic target is not 8-byte aligned in memory")
		}
		var orig uint64
		if w.Opcode == abi.OpAtomicCmpAndSwp {
			orig = shm.CompareAndSwap64(tgt, 0, w.CompareAdd, w.Swap)
		} else {
			orig = shm.FetchAdd64(tgt, 0, w.CompareAdd)
		}
		putLE64(s.word[:], orig)
		s.src[0] = s.word[:]
		scatter(local, s.src[:1])
		return outcome{bytes: 8}
	}
}

func putLE64(b []byte, v uint64) {
	_ = b[7]
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

// responderError reports an error the responder detected. For RC the
// responder QP goes to ERR as well (IBTA class A/C errors), with an event.
func (q *QP) responderError(p *QP, requester abi.Status, ev abi.EventType, reason string) outcome {
	p.adapter.Counters.RxErrors.Add(1)
	if q.typ == abi.QPTypeRC {
		p.Fail(ev, reason)
	}
	return outcome{status: requester}
}

// deliverRecv consumes a receive request of p and scatters the message
// (src, total bytes) into it, completing it on p's receive CQ.
func (q *QP) deliverRecv(p *QP, src [][]byte, total uint64, imm uint32, op abi.WCOpcode) outcome {
	s := &q.s
	switch p.rq.pop(&s.rwqe) {
	case popEmpty:
		if q.typ == abi.QPTypeUC {
			p.adapter.Counters.RxDrops.Add(1)
			return outcome{bytes: uint32(total)}
		}
		return outcome{stall: stallRNR, rnr: p.dp.Load().minRNRTimer}
	case popCorrupt:
		p.Fail(abi.EventQPFatal, "the receive queue's producer index is corrupt")
		return outcome{status: abi.StatusRemOpErr}
	case popBad:
		q.completeRecv(p, abi.StatusLocQPOpErr, 0, 0, op, 0, 0)
		p.enterError()
		return outcome{status: abi.StatusRemOpErr}
	}
	wcFlags := abi.WCWithImm
	if q.s.wqe.Opcode == abi.OpSend {
		// A SEND carries no immediate data: whatever the work request's
		// Imm field holds never reaches the responder.
		wcFlags, imm = 0, 0
	}
	if op == abi.WCRecvRDMAImm {
		// The data went to memory already; the receive only carries the immediate.
		q.completeRecv(p, abi.StatusSuccess, uint32(total), imm, op, wcFlags, 0)
		return outcome{bytes: uint32(total)}
	}
	dst, room, st := s.resolve(p.adapter, p.pd, s.rwqe.SGL[:s.rwqe.NumSGE], abi.AccessLocalWrite, s.dst[:0])
	if st != abi.StatusSuccess {
		q.completeRecv(p, abi.StatusLocProtErr, 0, 0, op, 0, 0)
		p.enterError()
		return outcome{status: abi.StatusRemOpErr}
	}
	if room < total {
		q.completeRecv(p, abi.StatusLocLenErr, 0, 0, op, 0, 0)
		p.enterError()
		return outcome{status: abi.StatusRemInvReqErr}
	}
	scatter(dst, src)
	q.completeRecv(p, abi.StatusSuccess, uint32(total), imm, op, wcFlags, 0)
	return outcome{bytes: uint32(total)}
}

func (q *QP) completeRecv(p *QP, st abi.Status, n, imm uint32, op abi.WCOpcode, fl abi.WCFlags, pkeyIndex uint16) {
	c := abi.CQE{WRID: q.s.rwqe.WRID, QPNum: p.qpn, Opcode: op, Status: st, ByteLen: n, Imm: imm, SrcQP: q.qpn, Flags: fl, PKeyIndex: pkeyIndex}
	if st != abi.StatusSuccess {
		c.Flags = 0
	}
	if !p.recvCQ.push(&c) {
		p.Fail(abi.EventQPFatal, "its receive completion queue overflowed")
	}
}

// executeUD sends one datagram: address handle, Q_Key, MTU, then a receive
// at the destination if one is posted; anything missing drops the datagram
// silently, as the wire would.
func (q *QP) executeUD(w *abi.SendWQE) outcome {
	s := &q.s
	a := q.adapter
	d := q.dp.Load()
	dgid, _, ok := q.ah(w.AH)
	if !ok {
		return outcome{status: abi.StatusLocQPOpErr}
	}
	var local [][]byte
	var total uint64
	if w.Inline != nil {
		s.src[1] = w.Inline
		local, total = s.src[1:2], uint64(len(w.Inline))
	} else {
		var st abi.Status
		local, total, st = s.resolve(a, q.pd, w.SGL[:w.NumSGE], 0, s.src[1:1])
		if st != abi.StatusSuccess {
			return outcome{status: st}
		}
	}
	if total > uint64(a.ActiveMTU.Bytes()) {
		return outcome{status: abi.StatusLocLenErr}
	}
	a.Counters.TxPackets.Add(1)
	a.Counters.TxBytes.Add(total)
	a.Counters.PathMemcpy.Add(1)
	sent := outcome{bytes: uint32(total)}
	if a.host == nil {
		return sent
	}
	p := a.host.LookupQP(dgid, w.RemoteQPN)
	if p == nil || p.typ != abi.QPTypeUD {
		return sent
	}
	if st := p.State(); st != abi.QPStateRTR && st != abi.QPStateRTS && st != abi.QPStateSQD && st != abi.QPStateSQE {
		p.adapter.Counters.RxDrops.Add(1)
		return sent
	}
	qkey := w.RemoteQKey
	if qkey&0x80000000 != 0 {
		qkey = d.qkey
	}
	if qkey != p.dp.Load().qkey {
		p.adapter.Counters.RxDrops.Add(1)
		return sent
	}
	switch p.rq.pop(&s.rwqe) {
	case popEmpty:
		p.adapter.Counters.RxDrops.Add(1)
		return sent
	case popCorrupt:
		p.Fail(abi.EventQPFatal, "the receive queue's producer index is corrupt")
		return sent
	case popBad:
		q.completeRecv(p, abi.StatusLocQPOpErr, 0, 0, abi.WCRecv, 0, 0)
		return sent
	}
	dst, room, st := s.resolve(p.adapter, p.pd, s.rwqe.SGL[:s.rwqe.NumSGE], abi.AccessLocalWrite, s.dst[:0])
	if st != abi.StatusSuccess {
		q.completeRecv(p, abi.StatusLocProtErr, 0, 0, abi.WCRecv, 0, 0)
		return sent
	}
	if room < total+abi.GRHSize {
		q.completeRecv(p, abi.StatusLocLenErr, 0, 0, abi.WCRecv, 0, 0)
		return sent
	}
	sgid := a.GIDs[0]
	if int(d.sgidIndex) < len(a.GIDs) {
		sgid = a.GIDs[d.sgidIndex]
	}
	abi.PutGRH(s.grh[:], int(total), sgid, dgid, 64)
	s.src[0] = s.grh[:]
	scatter(dst, s.src[:1+len(local)])
	fl, imm := abi.WCWithGRH, uint32(0)
	if w.Opcode == abi.OpSendImm {
		fl, imm = fl|abi.WCWithImm, w.Imm
	}
	q.completeRecv(p, abi.StatusSuccess, uint32(total)+abi.GRHSize, imm, abi.WCRecv, fl, 0)
	p.adapter.Counters.RxPackets.Add(1)
	p.adapter.Counters.RxBytes.Add(total)
	return sent
}
