package transport

// The RC responder: the expected PSN, one sequence-error NAK per gap,
// duplicates, the opcode sequence, lengths, keys, RNR, and the ACKs.

import (
	"encoding/binary"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

type responder struct {
	epsn    uint32 // next PSN expected
	msn     uint32 // messages completed, 24 bits
	nakSent bool   // a sequence-error NAK went out for the current gap

	// The message in progress.
	inSend, inWrite bool
	recv            Recv
	haveRecv        bool
	recvOff         uint32
	wrKey           uint32
	wrVA            uint64
	wrLen, wrOff    uint32

	// Responder resources: READs and atomics kept for duplicates.
	res     []resource
	resNext int

	// Answers not sent yet (answer.go): how many, the oldest's index in
	// res, an ACK held back behind them, and when to ask the link again.
	answering int
	ansHead   int
	ackOwed   bool
	resumeAt  int64
	retryWait int64 // the last wait for room (ns)
}

type resource struct {
	valid    bool
	atomic   bool // an atomic or an ATOMIC WRITE: one PSN, kept whole
	write    bool // an ATOMIC WRITE: answered by an empty READ response
	firstPSN uint32
	npkts    uint32
	va       uint64
	rkey     uint32
	length   uint32
	orig     uint64
	index    int    // its place in res
	ans      answer // its response, while being sent
}

func (q *QP) respondRC(env Env, p *wire.Packet) {
	s := &q.rsp
	d := psnDiff(p.PSN, s.epsn)
	switch {
	case d > 0:
		// A gap: NAK once with the PSN expected, then drop until it comes.
		if !s.nakSent {
			s.nakSent = true
			q.sendAck(env, wire.SyndromeNAKSeq, s.epsn)
		}
		env.Drop(DropSequence)
		return
	case d < 0:
		q.duplicate(env, p)
		return
	}
	s.nakSent = false
	f := p.Opcode.Flags()
	if q.cfg.XRC {
		// The XRCETH must name an XRC SRQ of the target's domain (IBTA
		// A14: else NAK invalid request).
		x, ok := env.(XRCEnv)
		if !ok || !x.SelectSRQ(p.XRCETH.SRQN) {
			q.responderError(env, wire.SyndromeNAKInvReq, "the XRCETH names no XRC SRQ of the target QP's XRC domain")
			return
		}
	}
	if st, reason := q.checkRequest(p, f); st != 0 {
		q.responderError(env, st, reason)
		return
	}
	switch {
	case f&wire.IsSend != 0:
		if !q.recvSend(env, p, f) {
			return
		}
	case f&wire.IsWrite != 0:
		if !q.recvWrite(env, p, f) {
			return
		}
	case f&wire.IsRead != 0:
		q.recvRead(env, p)
		return
	case f&wire.IsAtomicWrite != 0:
		q.recvAtomicWrite(env, p)
		return
	default:
		q.recvAtomic(env, p)
		return
	}
	s.epsn = psnAdd(s.epsn, 1)
	if p.AckReq {
		q.ackOrOwe(env)
	}
}

// checkRequest applies rxe's order of checks to an in-sequence request:
// the opcode sequence, the QP's access flags, the packet's length. It
// returns the NAK syndrome to answer with, or 0.
func (q *QP) checkRequest(p *wire.Packet, f uint32) (uint8, string) {
	s := &q.rsp
	first, last := f&wire.IsFirst != 0, f&wire.IsLast != 0
	switch {
	case s.inSend:
		if f&wire.IsSend == 0 || first {
			return wire.SyndromeNAKInvReq, "a SEND in progress was interrupted by another opcode"
		}
	case s.inWrite:
		if f&wire.IsWrite == 0 || first {
			return wire.SyndromeNAKInvReq, "an RDMA WRITE in progress was interrupted by another opcode"
		}
	default:
		if !first {
			return wire.SyndromeNAKInvReq, "a MIDDLE or LAST packet with no message in progress"
		}
	}
	if f&wire.IsFlush != 0 {
		// rxe NAKs a FLUSH its QP's access flags do not allow
		// (IB_ACCESS_FLUSH_GLOBAL/_PERSISTENT), and no vrdma QP has them:
		// rdma-core v44 has no such flags (docs/design/atomic-write.md).
		return wire.SyndromeNAKInvReq, "the QP's access flags do not allow FLUSH"
	}
	var need abi.Access
	switch {
	case f&(wire.IsWrite|wire.IsAtomicWrite) != 0:
		need = abi.AccessRemoteWrite
	case f&wire.IsRead != 0:
		need = abi.AccessRemoteRead
	case f&wire.IsAtomic != 0:
		need = abi.AccessRemoteAtomic
	}
	if q.cfg.Access&need != need {
		return wire.SyndromeNAKInvReq, "the QP's access flags do not allow the operation"
	}
	n := uint32(len(p.Payload))
	mtu := q.cfg.MTU
	if f&wire.HasPayload != 0 {
		if !last && n != mtu {
			return wire.SyndromeNAKInvReq, "a FIRST or MIDDLE packet that does not carry exactly one MTU"
		}
		if n > mtu {
			return wire.SyndromeNAKInvReq, "a packet longer than the path MTU"
		}
	}
	if f&wire.HasRETH != 0 && p.RETH.Length > 1<<31 {
		return wire.SyndromeNAKInvReq, "a DMA length above 2^31"
	}
	return 0, ""
}

// responderError NAKs an in-sequence request and moves the QP to ERR
// (IBTA class B/C errors: invalid request, remote access, operational).
func (q *QP) responderError(env Env, syndrome uint8, reason string) {
	q.sendAck(env, syndrome, q.rsp.epsn)
	ev := abi.EventQPReqErr
	if syndrome == wire.SyndromeNAKAccess {
		ev = abi.EventQPAccessErr
	}
	if q.rsp.haveRecv {
		q.rsp.haveRecv = false
		st := abi.StatusLocQPOpErr
		if syndrome == wire.SyndromeNAKInvReq {
			st = abi.StatusLocLenErr
		}
		env.CompleteRecv(&q.rsp.recv, &RecvCompletion{Status: st, Opcode: abi.WCRecv})
	}
	q.fail(env, ev, reason)
}

// sendAck sends an ACK or NAK with the current MSN.
func (q *QP) sendAck(env Env, syndrome uint8, psn uint32) {
	p := &q.pkt
	*p = wire.Packet{Opcode: q.transport() | wire.OpAcknowledge, PKey: q.cfg.PKey, DestQP: q.cfg.DestQPN, PSN: psn,
		AETH: wire.AETH{Syndrome: syndrome, MSN: q.rsp.msn}}
	env.Output(p, nil, 0, 0)
}

func (q *QP) rnrNAK(env Env, psn uint32) {
	q.sendAck(env, wire.SyndromeRNR|q.cfg.MinRNRTimer&0x1f, psn)
}

// recvSend places a SEND packet in the receive request it consumes. It
// returns false when the packet was not accepted (RNR or an error).
func (q *QP) recvSend(env Env, p *wire.Packet, f uint32) bool {
	s := &q.rsp
	if f&wire.IsFirst != 0 {
		switch env.TakeRecv(&s.recv) {
		case RecvEmpty:
			q.rnrNAK(env, p.PSN)
			return false
		case RecvBad:
			q.sendAck(env, wire.SyndromeNAKOpError, p.PSN)
			env.CompleteRecv(&s.recv, &RecvCompletion{Status: badRecvStatus(&s.recv), Opcode: abi.WCRecv})
			q.fail(env, abi.EventQPFatal, "a receive request is malformed")
			return false
		}
		s.haveRecv, s.recvOff, s.inSend = true, 0, true
	}
	n := uint32(len(p.Payload))
	if s.recvOff+n > s.recv.Length {
		q.responderError(env, wire.SyndromeNAKInvReq, "a SEND longer than the receive request's buffers")
		return false
	}
	scatterAt(s.recv.Spans, int(s.recvOff), p.Payload)
	s.recvOff += n
	if f&wire.IsLast != 0 {
		c := RecvCompletion{Status: abi.StatusSuccess, Opcode: abi.WCRecv, Bytes: s.recvOff, SrcQP: q.cfg.DestQPN}
		if f&wire.HasImm != 0 {
			c.Imm, c.Flags = p.Imm, abi.WCWithImm
		}
		if f&wire.HasIETH != 0 {
			// The responder invalidates the rkey of the IETH before the
			// receive completes (rxe's responder); an rkey it cannot
			// invalidate completes the receive with REM_INV_REQ_ERR and
			// NAKs the request as invalid.
			if !env.Invalidate(p.InvRKey) {
				s.haveRecv, s.inSend = false, false
				env.CompleteRecv(&s.recv, &RecvCompletion{Status: abi.StatusRemInvReqErr, Opcode: abi.WCRecv})
				q.responderError(env, wire.SyndromeNAKInvReq, "SEND with Invalidate of an rkey that is no bound type 2 memory window of the responder's PD")
				return false
			}
			c.InvRKey, c.Flags = p.InvRKey, abi.WCWithInv
		}
		s.inSend, s.haveRecv = false, false
		s.msn = psnAdd(s.msn, 1)
		env.CompleteRecv(&s.recv, &c)
	}
	return true
}

// recvWrite places an RDMA WRITE packet; WRITE with immediate consumes a
// receive request at its last packet.
func (q *QP) recvWrite(env Env, p *wire.Packet, f uint32) bool {
	s := &q.rsp
	if f&wire.IsFirst != 0 {
		s.wrKey, s.wrVA, s.wrLen, s.wrOff = p.RETH.RKey, p.RETH.VA, p.RETH.Length, 0
		if s.wrLen > 0 && env.Remote(s.wrKey, s.wrVA, s.wrLen, abi.AccessRemoteWrite) == nil {
			q.responderError(env, wire.SyndromeNAKAccess, "RDMA WRITE with an rkey, range or access that the region does not grant")
			return false
		}
	}
	n := uint32(len(p.Payload))
	last := f&wire.IsLast != 0
	if s.wrOff+n > s.wrLen || last && s.wrOff+n != s.wrLen {
		q.responderError(env, wire.SyndromeNAKInvReq, "RDMA WRITE payload does not match the DMA length of its RETH")
		return false
	}
	if last && f&wire.HasImm != 0 && !s.haveRecv {
		switch env.TakeRecv(&s.recv) {
		case RecvEmpty:
			q.rnrNAK(env, p.PSN)
			return false
		case RecvBad:
			q.sendAck(env, wire.SyndromeNAKOpError, p.PSN)
			env.CompleteRecv(&s.recv, &RecvCompletion{Status: badRecvStatus(&s.recv), Opcode: abi.WCRecvRDMAImm})
			q.fail(env, abi.EventQPFatal, "a receive request is malformed")
			return false
		}
		s.haveRecv = true
	}
	if n > 0 {
		dst := env.Remote(s.wrKey, s.wrVA+uint64(s.wrOff), n, abi.AccessRemoteWrite)
		if dst == nil {
			q.responderError(env, wire.SyndromeNAKAccess, "RDMA WRITE to a region that went away")
			return false
		}
		copy(dst, p.Payload)
	}
	s.wrOff += n
	s.inWrite = !last
	if last {
		s.msn = psnAdd(s.msn, 1)
		if f&wire.HasImm != 0 {
			s.haveRecv = false
			env.CompleteRecv(&s.recv, &RecvCompletion{Status: abi.StatusSuccess, Opcode: abi.WCRecvRDMAImm, Bytes: s.wrLen, Imm: p.Imm, Flags: abi.WCWithImm, SrcQP: q.cfg.DestQPN})
		}
	}
	return true
}

// recvRead executes a READ request: it consumes ⌈len/MTU⌉ PSNs, answered
// by as many response packets.
func (q *QP) recvRead(env Env, p *wire.Packet) {
	s := &q.rsp
	n := p.RETH.Length
	if n > 0 && env.Remote(p.RETH.RKey, p.RETH.VA, n, abi.AccessRemoteRead) == nil {
		q.responderError(env, wire.SyndromeNAKAccess, "RDMA READ with an rkey, range or access that the region does not grant")
		return
	}
	npkts := packets(abi.OpRDMARead, n, q.cfg.MTU)
	s.msn = psnAdd(s.msn, 1)
	r := q.keep(resource{firstPSN: p.PSN, npkts: npkts, va: p.RETH.VA, rkey: p.RETH.RKey, length: n})
	s.epsn = psnAdd(p.PSN, npkts)
	s.ackOwed = false // its responses acknowledge what came before
	q.queueAnswer(env, r, p.PSN, p.RETH.VA, n, q.now)
}

// sendReadPacket sends the next response packet of READ resource r's
// answer a. It returns false if the QP failed.
func (q *QP) sendReadPacket(env Env, r *resource, a *answer) bool {
	c := min(a.left, q.cfg.MTU)
	first, last := a.psn == a.start, a.left == c
	var op wire.Opcode
	switch {
	case first && last:
		op = wire.OpReadResponseOnly
	case first:
		op = wire.OpReadResponseFirst
	case last:
		op = wire.OpReadResponseLast
	default:
		op = wire.OpReadResponseMid
	}
	var src []byte
	if c > 0 {
		src = env.Remote(r.rkey, a.va, c, abi.AccessRemoteRead)
		if src == nil {
			a.pending = false
			q.responderError(env, wire.SyndromeNAKAccess, "RDMA READ from a region that went away")
			return false
		}
	}
	pk := &q.pkt
	*pk = wire.Packet{Opcode: q.transport() | op, PKey: q.cfg.PKey, DestQP: q.cfg.DestQPN, PSN: a.psn,
		AETH: wire.AETH{Syndrome: wire.SyndromeACK, MSN: a.msn}}
	q.spans[0] = src
	env.Output(pk, q.spans[:1], 0, int(c))
	q.spans[0] = nil
	a.left -= c
	a.va += uint64(c)
	a.psn = psnAdd(a.psn, 1)
	if last {
		a.pending = false
	}
	return true
}

// recvAtomic executes an atomic once and keeps its original value, so a
// duplicate is answered without executing it again.
func (q *QP) recvAtomic(env Env, p *wire.Packet) {
	s := &q.rsp
	a := &p.Atomic
	if a.VA%8 != 0 {
		q.responderError(env, wire.SyndromeNAKInvReq, "an atomic on an address that is not 8-byte aligned")
		return
	}
	tgt := env.Remote(a.RKey, a.VA, 8, abi.AccessRemoteAtomic)
	if tgt == nil {
		q.responderError(env, wire.SyndromeNAKAccess, "an atomic with an rkey, range or access that the region does not grant")
		return
	}
	var orig uint64
	var ok bool
	if p.Opcode.Op() == wire.OpCompareSwap {
		orig, ok = env.Atomic(tgt, true, a.Compare, a.SwapAdd)
	} else {
		orig, ok = env.Atomic(tgt, false, a.SwapAdd, 0)
	}
	if !ok {
		q.responderError(env, wire.SyndromeNAKInvReq, "an atomic target that is not 8-byte aligned in memory")
		return
	}
	s.msn = psnAdd(s.msn, 1)
	r := q.keep(resource{atomic: true, firstPSN: p.PSN, npkts: 1, orig: orig})
	s.epsn = psnAdd(p.PSN, 1)
	s.ackOwed = false // its answer acknowledges what came before
	q.queueAnswer(env, r, p.PSN, 0, 0, q.now)
}

// recvAtomicWrite executes an ATOMIC WRITE once, as rxe's responder: the
// RETH names 8 bytes the region grants REMOTE_WRITE over (else a remote
// access NAK), at an 8-byte aligned address (else an invalid request), and
// the packet carries exactly those 8 bytes. A duplicate is answered again
// without writing (duplicate).
func (q *QP) recvAtomicWrite(env Env, p *wire.Packet) {
	s := &q.rsp
	if p.RETH.Length != 8 || len(p.Payload) != 8 {
		q.responderError(env, wire.SyndromeNAKInvReq, "an ATOMIC WRITE whose DMA length or payload is not 8 bytes")
		return
	}
	if p.RETH.VA%8 != 0 {
		q.responderError(env, wire.SyndromeNAKInvReq, "an ATOMIC WRITE to an address that is not 8-byte aligned")
		return
	}
	tgt := env.Remote(p.RETH.RKey, p.RETH.VA, 8, abi.AccessRemoteWrite)
	if tgt == nil {
		q.responderError(env, wire.SyndromeNAKAccess, "an ATOMIC WRITE with an rkey, range or access that the region does not grant")
		return
	}
	if !env.AtomicWrite(tgt, binary.LittleEndian.Uint64(p.Payload)) {
		q.responderError(env, wire.SyndromeNAKInvReq, "an ATOMIC WRITE target that is not 8-byte aligned in memory")
		return
	}
	s.msn = psnAdd(s.msn, 1)
	r := q.keep(resource{atomic: true, write: true, firstPSN: p.PSN, npkts: 1})
	s.epsn = psnAdd(p.PSN, 1)
	s.ackOwed = false // its answer acknowledges what came before
	q.queueAnswer(env, r, p.PSN, 0, 0, q.now)
}

// sendAtomicWriteAck answers an ATOMIC WRITE with an RDMA READ Response
// Only without payload, as rxe's responder does.
func (q *QP) sendAtomicWriteAck(env Env, psn uint32, msn uint32) {
	pk := &q.pkt
	*pk = wire.Packet{Opcode: wire.TransportRC | wire.OpReadResponseOnly, PKey: q.cfg.PKey, DestQP: q.cfg.DestQPN, PSN: psn,
		AETH: wire.AETH{Syndrome: wire.SyndromeACK, MSN: msn}}
	env.Output(pk, nil, 0, 0)
}

func (q *QP) sendAtomicAck(env Env, psn uint32, orig uint64, msn uint32) {
	pk := &q.pkt
	*pk = wire.Packet{Opcode: q.transport() | wire.OpAtomicAcknowledge, PKey: q.cfg.PKey, DestQP: q.cfg.DestQPN, PSN: psn,
		AETH: wire.AETH{Syndrome: wire.SyndromeACK, MSN: msn}, AtomicAck: orig}
	env.Output(pk, nil, 0, 0)
}

// keep stores a READ or atomic in the responder resources, replacing the
// oldest.
func (q *QP) keep(r resource) *resource {
	s := &q.rsp
	r.valid = true
	r.index = s.resNext
	x := &s.res[s.resNext]
	if x.ans.pending {
		s.answering-- // overwritten before it was answered: a requester over its limit
	}
	*x = r
	s.resNext = (s.resNext + 1) % len(s.res)
	return x
}

// duplicate answers a request the responder has seen already: SEND and
// WRITE are acknowledged again, a READ is served again from the bytes its
// (possibly shortened) RETH asks, an atomic gets its saved original value.
func (q *QP) duplicate(env Env, p *wire.Packet) {
	f := p.Opcode.Flags()
	s := &q.rsp
	switch {
	case f&(wire.IsSend|wire.IsWrite) != 0:
		if p.AckReq {
			q.ackOrOwe(env)
		} else {
			env.Drop(DropDuplicate)
		}
	case f&wire.IsRead != 0:
		for i := range s.res {
			r := &s.res[i]
			d := psnDiff(p.PSN, r.firstPSN)
			if !r.valid || r.atomic || d < 0 || uint32(d) >= r.npkts {
				continue
			}
			// The retried request must lie inside the original one.
			off := uint64(d) * uint64(q.cfg.MTU)
			if p.RETH.RKey != r.rkey || p.RETH.VA != r.va+off || uint64(p.RETH.Length)+off != uint64(r.length) {
				break
			}
			q.dropAnswersFrom(r.firstPSN)
			q.queueAnswer(env, r, p.PSN, p.RETH.VA, p.RETH.Length, q.now)
			return
		}
		env.Drop(DropDuplicate)
	default:
		for i := range s.res {
			r := &s.res[i]
			if r.valid && r.atomic && r.firstPSN == p.PSN {
				q.dropAnswersFrom(r.firstPSN)
				q.queueAnswer(env, r, p.PSN, 0, 0, q.now)
				return
			}
		}
		env.Drop(DropDuplicate)
	}
}
