package transport

// The UC and UD responders: no ACKs and no NAKs. A UC gap drops the
// message in progress; UD messages are single packets checked by Q_Key.

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

func (q *QP) respondUC(env Env, p *wire.Packet) {
	s := &q.rsp
	f := p.Opcode.Flags()
	if p.PSN != s.epsn {
		// A gap: the message in progress is lost; resynchronise on the next
		// FIRST or ONLY. Its receive request is kept for the next message.
		if s.inSend || s.inWrite {
			env.Drop(DropSequence)
		}
		s.inSend, s.inWrite, s.recvOff = false, false, 0
		if f&wire.IsFirst == 0 {
			s.epsn = psnAdd(p.PSN, 1)
			env.Drop(DropSequence)
			return
		}
	}
	s.epsn = psnAdd(p.PSN, 1)
	if st, _ := q.checkRequest(p, f); st != 0 {
		q.ucDrop(env)
		return
	}
	if f&wire.IsSend != 0 {
		if f&wire.IsFirst != 0 && !s.haveRecv {
			switch env.TakeRecv(&s.recv) {
			case RecvEmpty:
				q.ucDrop(env)
				s.epsn = psnAdd(p.PSN, 1)
				return
			case RecvBad:
				env.CompleteRecv(&s.recv, &RecvCompletion{Status: badRecvStatus(&s.recv), Opcode: abi.WCRecv})
				q.fail(env, abi.EventQPFatal, "a receive request is malformed")
				return
			}
			s.haveRecv = true
		}
		if f&wire.IsFirst != 0 {
			s.recvOff, s.inSend = 0, true
		}
		n := uint32(len(p.Payload))
		if s.recvOff+n > s.recv.Length {
			// Too long for the buffers: the receive completes in error.
			s.haveRecv, s.inSend = false, false
			env.CompleteRecv(&s.recv, &RecvCompletion{Status: abi.StatusLocLenErr, Opcode: abi.WCRecv})
			q.fail(env, abi.EventQPFatal, "a UC SEND longer than the receive request's buffers")
			return
		}
		scatterAt(s.recv.Spans, int(s.recvOff), p.Payload)
		s.recvOff += n
		if f&wire.IsLast != 0 {
			c := RecvCompletion{Status: abi.StatusSuccess, Opcode: abi.WCRecv, Bytes: s.recvOff, SrcQP: q.cfg.DestQPN}
			if f&wire.HasImm != 0 {
				c.Imm, c.Flags = p.Imm, abi.WCWithImm
			}
			s.inSend, s.haveRecv = false, false
			env.CompleteRecv(&s.recv, &c)
		}
		return
	}
	// RDMA WRITE.
	if f&wire.IsFirst != 0 {
		s.wrKey, s.wrVA, s.wrLen, s.wrOff = p.RETH.RKey, p.RETH.VA, p.RETH.Length, 0
		if s.wrLen > 0 && env.Remote(s.wrKey, s.wrVA, s.wrLen, abi.AccessRemoteWrite) == nil {
			q.ucDrop(env)
			return
		}
		s.inWrite = true
	}
	n := uint32(len(p.Payload))
	last := f&wire.IsLast != 0
	if s.wrOff+n > s.wrLen || last && s.wrOff+n != s.wrLen {
		q.ucDrop(env)
		return
	}
	if last && f&wire.HasImm != 0 && !s.haveRecv {
		if env.TakeRecv(&s.recv) != RecvOK {
			q.ucDrop(env)
			return
		}
		s.haveRecv = true
	}
	if n > 0 {
		dst := env.Remote(s.wrKey, s.wrVA+uint64(s.wrOff), n, abi.AccessRemoteWrite)
		if dst == nil {
			q.ucDrop(env)
			return
		}
		copy(dst, p.Payload)
	}
	s.wrOff += n
	if last {
		s.inWrite = false
		if f&wire.HasImm != 0 {
			s.haveRecv = false
			env.CompleteRecv(&s.recv, &RecvCompletion{Status: abi.StatusSuccess, Opcode: abi.WCRecvRDMAImm, Bytes: s.wrLen, Imm: p.Imm, Flags: abi.WCWithImm, SrcQP: q.cfg.DestQPN})
		}
	}
}

// ucDrop abandons the UC message in progress.
func (q *QP) ucDrop(env Env) {
	s := &q.rsp
	s.inSend, s.inWrite, s.recvOff = false, false, 0
	env.Drop(DropInvalid)
}

func (q *QP) respondUD(env Env, p *wire.Packet) {
	qkey := q.cfg.QKey
	if p.DETH.QKey != qkey {
		env.Drop(DropQKey)
		return
	}
	n := uint32(len(p.Payload))
	if n > q.cfg.MTU {
		env.Drop(DropInvalid)
		return
	}
	s := &q.rsp
	switch env.TakeRecv(&s.recv) {
	case RecvEmpty:
		env.Drop(DropNoRecv)
		return
	case RecvBad:
		env.CompleteRecv(&s.recv, &RecvCompletion{Status: badRecvStatus(&s.recv), Opcode: abi.WCRecv})
		q.fail(env, abi.EventQPFatal, "a receive request is malformed")
		return
	}
	if abi.GRHSize+n > s.recv.Length {
		env.CompleteRecv(&s.recv, &RecvCompletion{Status: abi.StatusLocLenErr, Opcode: abi.WCRecv})
		return
	}
	scatterAt(s.recv.Spans, 0, env.GRH(p))
	scatterAt(s.recv.Spans, abi.GRHSize, p.Payload)
	c := RecvCompletion{Status: abi.StatusSuccess, Opcode: abi.WCRecv, Bytes: abi.GRHSize + n, Flags: abi.WCWithGRH, SrcQP: p.DETH.SrcQP, SL: abi.WCSLRoCEv2IPv6}
	if wire.GRHIsIPv4(p) {
		c.SL = abi.WCSLRoCEv2IPv4
	}
	if p.Opcode.Flags()&wire.HasImm != 0 {
		c.Imm = p.Imm
		c.Flags |= abi.WCWithImm
	}
	env.CompleteRecv(&s.recv, &c)
}
