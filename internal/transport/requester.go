package transport

// The requester: PSNs, segmentation by the path MTU, the window, fences and
// the READ/atomic limit, retransmission from a PSN (go-back-N).

import (
	"encoding/binary"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

type requester struct {
	wqes       []WQE
	head, tail uint64 // oldest not completed; next free slot
	next       uint64 // the request being sent (head <= next <= tail)
	off        uint32 // bytes of wqes[next] sent already
	psn        uint32 // next PSN to send
	ackPSN     uint32 // oldest PSN not acknowledged
	rdOut      int    // READs and atomics sent and not completed

	timerAt  int64 // retransmit deadline; 0 = not running
	rnrUntil int64 // no sending before this (RNR wait); 0 = none
	retryCnt int   // retries left (timeouts and sequence NAKs)
	rnrLeft  int   // RNR retries left
	lastNAK  uint32
	nakValid bool // lastNAK is a PSN we rewound to and have not resent past
	noAck    int  // packets sent since the last with AckReq
}

// maxPktPerAck is how many packets go out without AckReq at most, as
// rxe's RXE_MAX_PKT_PER_ACK: a long message is acknowledged as it goes.
const maxPktPerAck = 64

func (r *requester) at(i uint64) *WQE { return &r.wqes[i%uint64(len(r.wqes))] }

// pump sends what the window, the RNR wait, fences and the READ/atomic
// limit allow.
func (q *QP) pump(env Env, now int64) {
	r := &q.req
	if q.err || r.rnrUntil != 0 {
		return
	}
	sent := false
	for r.next != r.tail && !q.err {
		w := r.at(r.next)
		if q.cfg.Type == abi.QPTypeRC && psnDiff(r.psn, r.ackPSN) >= maxUnackedPSNs {
			break
		}
		if r.off == 0 && !w.started {
			if q.cfg.Type == abi.QPTypeRC {
				if w.Fence && r.rdOut > 0 {
					break
				}
				if w.readOrAtomic() && r.rdOut >= q.cfg.MaxRdAtomic {
					break
				}
			}
			w.started = true
			w.firstPSN = r.psn
			w.npkts = packets(w.Op, w.Length, q.cfg.MTU)
			if w.readOrAtomic() {
				r.rdOut++
			}
		}
		if !q.emit(env, w) {
			break
		}
		sent = true
		if q.cfg.Type != abi.QPTypeRC {
			q.completeSent(env)
		}
	}
	if sent {
		r.nakValid = false
		if q.cfg.Type == abi.QPTypeRC && r.timerAt == 0 && q.cfg.Timeout != 0 {
			r.timerAt = now + abi.AckTimeout(q.cfg.Timeout)
		}
	}
}

// completeSent completes UC and UD requests once their last packet is out:
// nothing acknowledges them.
func (q *QP) completeSent(env Env) {
	r := &q.req
	for r.head != r.next {
		w := r.at(r.head)
		r.head++
		env.Complete(w, abi.StatusSuccess)
	}
	r.ackPSN = r.psn
}

// emit sends the next packet of w (all of a READ request) and advances the
// requester. It returns false when w cannot be sent.
func (q *QP) emit(env Env, w *WQE) bool {
	r := &q.req
	mtu := q.cfg.MTU
	p := &q.pkt
	*p = wire.Packet{PKey: q.cfg.PKey, DestQP: q.cfg.DestQPN, PSN: r.psn, XRCETH: wire.XRCETH{SRQN: w.SRQN}}
	tr := q.transport()

	switch {
	case q.cfg.Type == abi.QPTypeUD:
		if w.Length > mtu {
			r.next++
			r.head++ // UD requests complete as they go: w is at the head
			env.Complete(w, abi.StatusLocLenErr)
			return true
		}
		p.Opcode = wire.TransportUD | wire.OpSendOnly
		if w.Op == abi.OpSendImm {
			p.Opcode = wire.TransportUD | wire.OpSendOnlyImm
			p.Imm = w.Imm
		}
		p.SE = w.Solicited
		p.Dst = w.Dest
		p.DestQP = w.DestQPN
		p.DETH = wire.DETH{QKey: w.QKey, SrcQP: q.cfg.QPN}
		env.Output(p, w.Local, 0, int(w.Length))
		r.psn = psnAdd(r.psn, 1)
		r.next++
		return true

	case w.Op == abi.OpRDMARead:
		// One request for what is still missing: on a retry, the bytes
		// already received are not asked for again.
		p.Opcode = tr | wire.OpReadRequest
		p.AckReq = true
		p.RETH = wire.RETH{VA: w.RemoteAddr + uint64(r.off), RKey: w.RKey, Length: w.Length - r.off}
		env.Output(p, nil, 0, 0)
		r.psn = psnAdd(w.firstPSN, w.npkts)
		r.next++
		r.off = 0
		return true

	case w.Op.IsAtomic():
		p.Opcode = tr | wire.OpFetchAdd
		if w.Op == abi.OpAtomicCmpAndSwp {
			p.Opcode = tr | wire.OpCompareSwap
			p.Atomic = wire.AtomicETH{VA: w.RemoteAddr, RKey: w.RKey, SwapAdd: w.Swap, Compare: w.CompareAdd}
		} else {
			p.Atomic = wire.AtomicETH{VA: w.RemoteAddr, RKey: w.RKey, SwapAdd: w.CompareAdd}
		}
		p.AckReq = true
		env.Output(p, nil, 0, 0)
		r.psn = psnAdd(r.psn, 1)
		r.next++
		return true

	case w.Op == abi.OpAtomicWrite:
		// A RETH for 8 bytes and the 8 bytes, which the request carries.
		p.Opcode = tr | wire.OpAtomicWrite
		p.AckReq = true
		p.RETH = wire.RETH{VA: w.RemoteAddr, RKey: w.RKey, Length: 8}
		binary.LittleEndian.PutUint64(q.word[:], w.CompareAdd)
		q.spans[0] = q.word[:]
		env.Output(p, q.spans[:], 0, 8)
		q.spans[0] = nil
		r.psn = psnAdd(r.psn, 1)
		r.next++
		return true
	}

	// SEND and WRITE: FIRST and MIDDLE carry exactly one MTU.
	remaining := w.Length - r.off
	n := remaining
	if n > mtu {
		n = mtu
	}
	first, last := r.off == 0, remaining <= mtu
	write := w.Op == abi.OpRDMAWrite || w.Op == abi.OpRDMAWriteImm
	imm := w.Op == abi.OpSendImm || w.Op == abi.OpRDMAWriteImm
	inv := w.Op == abi.OpSendInv && q.cfg.Type == abi.QPTypeRC // 0x16/0x17 are RC (and XRC) opcodes only
	var op wire.Opcode
	switch {
	case inv && first && last:
		op = wire.OpSendOnlyInv
	case inv && last:
		op = wire.OpSendLastInv
	case write && first && last && imm:
		op = wire.OpWriteOnlyImm
	case write && first && last:
		op = wire.OpWriteOnly
	case write && first:
		op = wire.OpWriteFirst
	case write && last && imm:
		op = wire.OpWriteLastImm
	case write && last:
		op = wire.OpWriteLast
	case write:
		op = wire.OpWriteMiddle
	case first && last && imm:
		op = wire.OpSendOnlyImm
	case first && last:
		op = wire.OpSendOnly
	case first:
		op = wire.OpSendFirst
	case last && imm:
		op = wire.OpSendLastImm
	case last:
		op = wire.OpSendLast
	default:
		op = wire.OpSendMiddle
	}
	p.Opcode = tr | op
	if write && first {
		p.RETH = wire.RETH{VA: w.RemoteAddr, RKey: w.RKey, Length: w.Length}
	}
	if imm && last {
		p.Imm = w.Imm
	}
	if inv && last {
		p.InvRKey = w.Imm // the rkey to invalidate, in the IETH
	}
	if last {
		p.SE = w.Solicited && !write || w.Solicited && imm
	}
	if q.cfg.Type == abi.QPTypeRC {
		r.noAck++
		if last || r.noAck > maxPktPerAck {
			p.AckReq = true
			r.noAck = 0
		}
	}
	env.Output(p, w.Local, int(r.off), int(n))
	r.psn = psnAdd(r.psn, 1)
	if last {
		r.off = 0
		r.next++
	} else {
		r.off += n
	}
	return true
}

// transport returns the transport class of the QP's opcodes.
func (q *QP) transport() wire.Opcode {
	if q.cfg.XRC {
		return wire.TransportXRC
	}
	return transportOf(q.cfg.Type)
}

func transportOf(t abi.QPType) wire.Opcode {
	switch t {
	case abi.QPTypeUC:
		return wire.TransportUC
	case abi.QPTypeUD:
		return wire.TransportUD
	}
	return wire.TransportRC
}

// rewind makes the requester send again from psn: the request that
// consumed psn, from the packet with that PSN (a READ from the first
// response not yet received), and counts the go-back-N (env.Retransmit).
// It reports false when no outstanding request consumed psn.
func (q *QP) rewind(env Env, psn uint32, cause RetryCause) bool {
	r := &q.req
	from := r.psn
	for i := r.head; i != r.tail; i++ {
		w := r.at(i)
		if !w.started {
			break
		}
		d := psnDiff(psn, w.firstPSN)
		if d < 0 || uint32(d) >= w.npkts {
			continue
		}
		if w.Op == abi.OpRDMARead {
			d = int32(w.resp) // ask only for what is missing
		}
		if w.Op.IsAtomic() || w.Op == abi.OpAtomicWrite {
			d = 0
		}
		r.next = i
		r.off = uint32(d) * q.cfg.MTU
		r.psn = psnAdd(w.firstPSN, uint32(d))
		// Requests after this one are sent again from scratch.
		r.rdOut = 0
		for j := r.head; j != r.tail; j++ {
			x := r.at(j)
			if j > i {
				x.started = false
				x.resp = 0
			} else if x.readOrAtomic() {
				r.rdOut++
			}
		}
		env.Retransmit(cause, uint32(max(psnDiff(from, r.psn), 0)))
		return true
	}
	return false
}

// retry sends again from psn after a timeout or a sequence error (cause),
// spending one of retry_cnt (7: for ever). When the budget is spent the
// oldest request completes with RETRY_EXC_ERR and the QP fails.
func (q *QP) retry(env Env, now int64, psn uint32, cause RetryCause) {
	r := &q.req
	if cause == RetryNAK && r.nakValid && r.lastNAK == psn {
		return // rxe follows an RNR NAK with a sequence NAK for the same PSN
	}
	if q.cfg.RetryCnt != 7 {
		if r.retryCnt == 0 {
			q.completeHeadError(env, abi.StatusRetryExcErr, "the transport retry count was exceeded: the peer does not answer")
			return
		}
		r.retryCnt--
	}
	if !q.rewind(env, psn, cause) {
		return
	}
	r.lastNAK, r.nakValid = psn, true
	r.timerAt = 0
	q.pump(env, now)
}

// completeHeadError completes the oldest request with status and stops
// the QP; the owner flushes the rest.
func (q *QP) completeHeadError(env Env, status abi.Status, reason string) {
	r := &q.req
	if r.head == r.tail {
		q.fail(env, NoEvent, reason)
		return
	}
	w := r.at(r.head)
	r.head++
	if r.next < r.head {
		r.next, r.off = r.head, 0
	}
	env.Complete(w, status)
	q.fail(env, NoEvent, reason)
}
