package engine

// The RC and UC operations on the same host: the requester's checks, the
// responder's checks in rxe's order, one copy, the completions.

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
)

// execute runs one validated send work request.
func (q *QP) execute(w *abi.SendWQE) outcome {
	if q.typ == abi.QPTypeUD {
		return q.executeUD(w)
	}
	switch w.Opcode {
	case abi.OpBindMW:
		return outcome{status: q.bindMW(w)}
	case abi.OpLocalInv:
		return outcome{status: q.localInvalidate(w)}
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
	case w.Opcode == abi.OpAtomicWrite:
		total = 8 // the value travels in the request itself
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
		if out.bytes > 0 {
			// One copy between the two regions, counted once, by the requester.
			a.Counters.CopyMsgs.Add(1)
			a.Counters.CopyBytes.Add(uint64(out.bytes))
		}
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
	if p == nil || p.typ != q.typ || !xrcPair(q.xrc, p.xrc) {
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
	if q.adapter.OwnsGID(pd.dgid) {
		return p
	}
	return nil
}

// respond performs the responder's half of an RC/UC operation on peer p,
// in the order rxe checks: opcode against the QP's access flags, receive
// resources (RNR), length, rkey; then the copy and the completions.
func (q *QP) respond(p *QP, w *abi.SendWQE, local [][]byte, total uint64) outcome {
	s := &q.s
	pd := p.dp.Load()
	rq := p.rq
	if p.xrc == xrcTGT {
		x := p.xrcTarget(w.RemoteQPN)
		if x == nil {
			return q.responderError(p, abi.StatusRemInvReqErr, abi.EventQPReqErr, "the request names no XRC SRQ of the target QP's XRC domain")
		}
		s.rx = recvSide{rq: x, pd: x.pd, cq: x.cq}
		defer func() { s.rx = recvSide{} }()
		rq = x
	}
	var need abi.Access
	switch {
	case w.Opcode == abi.OpRDMAWrite || w.Opcode == abi.OpRDMAWriteImm || w.Opcode == abi.OpAtomicWrite:
		need = abi.AccessRemoteWrite
	case w.Opcode == abi.OpRDMARead:
		need = abi.AccessRemoteRead
	case w.Opcode.IsAtomic():
		need = abi.AccessRemoteAtomic
	}
	if pd.access&need != need {
		return q.responderError(p, abi.StatusRemInvReqErr, abi.EventQPReqErr, "the QP's access flags do not allow "+w.Opcode.String())
	}
	consumesRecv := w.Opcode == abi.OpSend || w.Opcode == abi.OpSendImm || w.Opcode == abi.OpSendInv || w.Opcode == abi.OpRDMAWriteImm
	if consumesRecv && rq.empty() {
		if q.typ == abi.QPTypeUC {
			p.adapter.Counters.RxDrops.Add(1)
			return outcome{bytes: uint32(total)}
		}
		return outcome{stall: stallRNR, rnr: pd.minRNRTimer}
	}

	switch w.Opcode {
	case abi.OpRDMAWrite, abi.OpRDMAWriteImm:
		if total > 0 {
			dst := s.remote(p, w.RKey, w.RemoteAddr, uint32(total), abi.AccessRemoteWrite)
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

	case abi.OpSendInv:
		// The responder invalidates its type 2 window first (rxe's
		// responder: an rkey it cannot invalidate is an invalid request).
		if !invalidate(p.adapter, p.respPD(s), w.Imm) {
			return q.responderError(p, abi.StatusRemInvReqErr, abi.EventQPReqErr, "SEND_WITH_INV of an rkey that is no bound type 2 memory window of the responder's PD")
		}
		return q.deliverRecv(p, local, total, w.Imm, abi.WCRecv)

	case abi.OpRDMARead:
		if total > 0 {
			src := s.remote(p, w.RKey, w.RemoteAddr, uint32(total), abi.AccessRemoteRead)
			if src == nil {
				return q.responderError(p, abi.StatusRemAccessErr, abi.EventQPAccessErr, "RDMA READ with an rkey, range or access that the region does not grant")
			}
			s.src[0] = src
			scatter(local, s.src[:1])
		}
		return outcome{bytes: uint32(total)}

	case abi.OpAtomicWrite:
		return q.atomicWrite(p, w)

	default: // atomics
		if w.RemoteAddr%8 != 0 {
			return q.responderError(p, abi.StatusRemInvReqErr, abi.EventQPReqErr, "atomic on an address that is not 8-byte aligned")
		}
		tgt := s.remote(p, w.RKey, w.RemoteAddr, 8, abi.AccessRemoteAtomic)
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

// atomicWrite stores the request's 8 bytes at its remote address as one
// store, as rxe's responder does: the region must grant REMOTE_WRITE over
// the 8 bytes (else a remote access error) and the address must be 8-byte
// aligned (else an invalid request).
func (q *QP) atomicWrite(p *QP, w *abi.SendWQE) outcome {
	if w.RemoteAddr%8 != 0 {
		return q.responderError(p, abi.StatusRemInvReqErr, abi.EventQPReqErr, "ATOMIC_WRITE to an address that is not 8-byte aligned")
	}
	tgt := q.s.remote(p, w.RKey, w.RemoteAddr, 8, abi.AccessRemoteWrite)
	if tgt == nil {
		return q.responderError(p, abi.StatusRemAccessErr, abi.EventQPAccessErr, "ATOMIC_WRITE with an rkey, range or access that the region does not grant")
	}
	if !shm.Aligned8(tgt, 0) {
		return q.responderError(p, abi.StatusRemInvReqErr, abi.EventQPReqErr, "ATOMIC_WRITE target is not 8-byte aligned in memory")
	}
	shm.Store64(tgt, 0, w.CompareAdd)
	return outcome{bytes: 8}
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
	rq := p.rq
	if s.rx.rq != nil {
		rq = s.rx.rq
	}
	switch rq.pop(&s.rwqe) {
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
	switch q.s.wqe.Opcode {
	case abi.OpSend:
		// A SEND carries no immediate data: whatever the work request's
		// Imm field holds never reaches the responder.
		wcFlags, imm = 0, 0
	case abi.OpSendInv:
		wcFlags = abi.WCWithInv // imm: the rkey invalidated
	}
	if op == abi.WCRecvRDMAImm {
		// The data went to memory already; the receive only carries the immediate.
		q.completeRecv(p, abi.StatusSuccess, uint32(total), imm, op, wcFlags, 0)
		return outcome{bytes: uint32(total)}
	}
	dst, room, st := s.resolve(p.adapter, p.respPD(s), s.rwqe.SGL[:s.rwqe.NumSGE], abi.AccessLocalWrite, s.dst[:0])
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
	cq := p.recvCQ
	if q.s.rx.cq != nil {
		cq = q.s.rx.cq // an XRC SRQ's
	}
	if !cq.push(&c) {
		p.Fail(abi.EventQPFatal, "its receive completion queue overflowed")
	}
}

// completeRecvSL completes a UD receive successfully, its completion's sl
// saying what its GRH area holds (abi.WCSLRoCEv2IPv6, ...).
func (q *QP) completeRecvSL(p *QP, n, imm uint32, fl abi.WCFlags, sl uint8) {
	c := abi.CQE{WRID: q.s.rwqe.WRID, QPNum: p.qpn, Opcode: abi.WCRecv, Status: abi.StatusSuccess, ByteLen: n, Imm: imm, SrcQP: q.qpn, Flags: fl, SL: sl}
	if !p.recvCQ.push(&c) {
		p.Fail(abi.EventQPFatal, "its receive completion queue overflowed")
	}
}

// xrcPair reports whether a requester of role from may reach a responder
// of role to: RC to RC, an XRC initiator to an XRC target.
func xrcPair(from, to xrcRole) bool {
	if from == xrcINI {
		return to == xrcTGT
	}
	return from == xrcNone && to == xrcNone
}

// respPD is the protection domain p responds in: an XRC target's is that
// of the SRQ the request named (s.rx), any other QP's its own.
func (p *QP) respPD(s *scratch) *PD {
	if p.xrc == xrcTGT {
		return s.rx.pd
	}
	return p.pd
}
