package engine

// UD datagrams on the same host.

import (
	"github.com/vrdma/vrdma/internal/abi"
)

// executeUD sends one datagram: address handle, Q_Key, MTU, then a receive
// at the destination if one is posted; anything missing drops the datagram
// silently, as the wire would.
func (q *QP) executeUD(w *abi.SendWQE) outcome {
	s := &q.s
	a := q.adapter
	d := q.dp.Load()
	dgid, _, ahPD, ok := q.ah(w.AH)
	if !ok || ahPD != q.pd {
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
	if total > uint64(a.PortMTU().Bytes()) {
		return outcome{status: abi.StatusLocLenErr}
	}
	qkey := w.RemoteQKey
	if qkey&0x80000000 != 0 {
		qkey = d.qkey
	}
	if w.RemoteQPN == MulticastQPN && IsMulticastGID(dgid) {
		return q.sendMcast(w, dgid, local, total, qkey)
	}
	if h := a.host; h != nil && !h.IsLocalGID(dgid) {
		_, sgidIndex, _, _ := q.ah(w.AH)
		return q.sendUDWire(w, dgid, sgidIndex, local, total, qkey)
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
	q.deliverUD(p, w, dgid, local, total, qkey)
	return sent
}

// deliverUD copies a datagram of q's into a receive of p, a UD QP of this
// host, with the GRH in front, when p's state and Q_Key take it.
func (q *QP) deliverUD(p *QP, w *abi.SendWQE, dgid [16]byte, local [][]byte, total uint64, qkey uint32) {
	s := &q.s
	a := q.adapter
	d := q.dp.Load()
	if st := p.State(); st != abi.QPStateRTR && st != abi.QPStateRTS && st != abi.QPStateSQD && st != abi.QPStateSQE {
		p.adapter.Counters.RxDrops.Add(1)
		return
	}
	if qkey != p.dp.Load().qkey {
		p.adapter.Counters.RxDrops.Add(1)
		return
	}
	switch p.rq.pop(&s.rwqe) {
	case popEmpty:
		p.adapter.Counters.RxDrops.Add(1)
		return
	case popCorrupt:
		p.Fail(abi.EventQPFatal, "the receive queue's producer index is corrupt")
		return
	case popBad:
		q.completeRecv(p, abi.StatusLocQPOpErr, 0, 0, abi.WCRecv, 0, 0)
		p.enterError()
		return
	}
	dst, room, st := s.resolve(p.adapter, p.pd, s.rwqe.SGL[:s.rwqe.NumSGE], abi.AccessLocalWrite, s.dst[:0])
	if st != abi.StatusSuccess {
		q.completeRecv(p, abi.StatusLocProtErr, 0, 0, abi.WCRecv, 0, 0)
		return
	}
	if room < total+abi.GRHSize {
		q.completeRecv(p, abi.StatusLocLenErr, 0, 0, abi.WCRecv, 0, 0)
		return
	}
	gids := a.GIDs()
	sgid := gids[0]
	if int(d.sgidIndex) < len(gids) {
		sgid = gids[d.sgidIndex]
	}
	abi.PutGRH(s.grh[:], int(total), sgid, dgid, 64)
	s.src[0] = s.grh[:]
	scatter(dst, s.src[:1+len(local)])
	if total > 0 {
		q.adapter.Counters.CopyMsgs.Add(1) // each delivery is a copy
		q.adapter.Counters.CopyBytes.Add(total)
	}
	fl, imm := abi.WCWithGRH, uint32(0)
	if w.Opcode == abi.OpSendImm {
		fl, imm = fl|abi.WCWithImm, w.Imm
	}
	// The GRH area holds an IPv6 header (PutGRH), whatever the GIDs' family.
	q.completeRecvSL(p, uint32(total)+abi.GRHSize, imm, fl, abi.WCSLRoCEv2IPv6)
	p.adapter.Counters.RxPackets.Add(1)
	p.adapter.Counters.RxBytes.Add(total)
}
