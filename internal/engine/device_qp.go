package engine

// A QP of an adapter bound to a device (device.go): the device's QP does
// the transport; the engine forwards the rings' work requests to it, one
// batch per doorbell, and the states the client moves it through.

import (
	"fmt"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
)

// devQP is a QP's counterpart on the device and the batch buffers the
// runner translates into (allocated once).
type devQP struct {
	q      *QP // the QP it stands for: its rings, CQs and state
	u      *DeviceUplink
	qp     verbs.QP
	send   *devCQ
	recv   *devCQ
	sends  []verbs.SendWR
	recvs  []verbs.RecvWR
	sges   []verbs.SGE
	inl    []byte // the batch's inline data, which the message carries
	errSet bool   // the device QP was moved to ERR; under procMu
	// What the device holds, by ring index (device_slots.go): the one
	// record the completions free and a device that goes away flushes
	// (device_fault.go).
	slots devSlots
	// A UD QP's (device_ud.go): its sends name address handles.
	ud      bool
	udSends []verbs.UDSendWR
}

// createDevQP makes q's device QP on the adapter's uplink; q.qpn becomes
// the device's QPN.
func createDevQP(q *QP, cfg *QPConfig) error {
	u, err := q.adapter.current()
	if err != nil {
		return err
	}
	ud := q.apiType == abi.QPTypeUD
	if q.apiType != abi.QPTypeRC && !ud {
		return fmt.Errorf("adapter %s is on verbs uplink %s, which carries RC and UD QPs only: %w", q.adapter.Name, u.Name, ErrDeviceQP)
	}
	var onSRQ *devSRQ
	if cfg.SRQ != nil {
		if onSRQ = cfg.SRQ.dev; onSRQ == nil || ud || onSRQ.u != u {
			return fmt.Errorf("adapter %s is on verbs uplink %s, which carries RC QPs on an SRQ of the device only: %w", q.adapter.Name, u.Name, ErrDeviceQP)
		}
	}
	s, err := u.useCQ(cfg.SendCQ)
	if err != nil {
		return err
	}
	r, err := u.useCQ(cfg.RecvCQ)
	if err != nil {
		u.unuseCQ(cfg.SendCQ)
		return err
	}
	c := q.caps
	inline := cfg.Caps.MaxInlineData // what the client asked; the ring may hold more
	if inline > verbs.MaxWRInline || (ud && inline > 0) {
		u.unuseCQ(cfg.SendCQ)
		u.unuseCQ(cfg.RecvCQ)
		if ud {
			return fmt.Errorf("adapter %s is on verbs uplink %s, which sends no inline data on UD QPs yet, not %d bytes: ask for max_inline_data 0: %w", q.adapter.Name, u.Name, inline, ErrDeviceQP)
		}
		return fmt.Errorf("adapter %s is on verbs uplink %s, which sends at most %d inline bytes per request, not %d: ask for less inline data: %w", q.adapter.Name, u.Name, verbs.MaxWRInline, inline, ErrDeviceQP)
	}
	vc := verbs.QPCap{MaxSendWR: uint32(c.MaxSendWR), MaxRecvWR: uint32(c.MaxRecvWR),
		MaxSendSGE: uint32(min(c.MaxSendSGE, verbs.MaxWRSGE)), MaxRecvSGE: uint32(min(c.MaxRecvSGE, verbs.MaxWRSGE)), MaxInline: uint32(inline)}
	create, kind := u.dev.CreateQP, "an RC QP"
	switch {
	case ud:
		create, kind = u.dev.CreateUDQP, "a UD QP"
	case onSRQ != nil:
		vc.MaxRecvWR, vc.MaxRecvSGE = 0, 0
		create = func(s, r verbs.CQ, c verbs.QPCap) (verbs.QP, error) {
			return onSRQ.dev.CreateQPOnSRQ(s, r, onSRQ.srq, c)
		}
		kind = "an RC QP on an SRQ"
	}
	vq, err := create(s.cq, r.cq, vc)
	if err != nil {
		u.unuseCQ(cfg.SendCQ)
		u.unuseCQ(cfg.RecvCQ)
		return fmt.Errorf("%s on %s: %w", kind, u.Name, err)
	}
	q.dev = &devQP{q: q, u: u, qp: vq, send: s, recv: r, ud: ud,
		sends: make([]verbs.SendWR, 0, verbs.MaxBatch), recvs: make([]verbs.RecvWR, 0, verbs.MaxBatch),
		sges: make([]verbs.SGE, verbs.MaxBatch*verbs.MaxWRSGE), inl: make([]byte, 0, verbs.MaxPostBody), slots: newDevSlots(q.sq.Entries, abi.RoundPow2(c.MaxRecvWR))}
	if ud {
		q.dev.udSends = make([]verbs.UDSendWR, 0, verbs.MaxBatch)
	}
	q.qpn = vq.QPN
	// Inline data goes to the device as it is (the helper posts it with
	// IBV_SEND_INLINE): the client may post what the device takes.
	q.caps.MaxInlineData = min(q.caps.MaxInlineData, int(vq.Cap.MaxInline), verbs.MaxWRInline)
	a := q.adapter
	a.devMu.Lock()
	a.devQPs++
	a.devMu.Unlock()
	return nil
}

// destroy frees the device QP and its uses of the device CQs (nothing
// for a nil d: a QP not on a device).
func (d *devQP) destroy() {
	if d == nil {
		return
	}
	q := d.q
	d.u.mu.Lock()
	if d.u.qps[q.qpn] == q {
		delete(d.u.qps, q.qpn)
	}
	d.u.mu.Unlock()
	_ = d.u.dev.DestroyQP(d.qp)
	d.u.unuseCQ(d.send.ecq)
	d.u.unuseCQ(d.recv.ecq)
	a := q.adapter
	a.devMu.Lock()
	a.devQPs--
	a.devMu.Unlock()
}

// modify moves the device QP to `to` with the attributes a holds.
//
// The move to ERR is made under procMu, and errSet set with it: the runner
// is not posting meanwhile, and from then on it flushes what the client
// posts instead of handing it to the device (process), although the
// QP's own state turns ERR only after this returns. A device flushes what
// it holds as its QP enters ERR, but a receive posted to it afterwards may
// never complete: rxe's receive queue is memory the helper writes, and its
// kernel looks at it again only on a packet or a transition, so rping's
// last receive, posted as rdma_disconnect moved the QP to ERR, waited for
// its flush for ever.
func (d *devQP) modify(to abi.QPState, a *qpstate.Attr) error {
	q := d.q
	if to == abi.QPStateErr {
		q.procMu.Lock()
		defer q.procMu.Unlock()
	}
	switch {
	case d.ud:
		if err := d.modifyUD(to, a); err != nil {
			return err
		}
	default:
		if err := d.modifyRC(to, a); err != nil {
			return err
		}
	}
	if to == abi.QPStateErr {
		d.errSet = true
	}
	if to == abi.QPStateReset {
		q.procMu.Lock()
		d.errSet = false
		q.devErr.Store(false)
		q.procMu.Unlock()
	}
	return nil
}

// modifyRC moves the device RC QP to `to` with the attributes that
// transition takes.
func (d *devQP) modifyRC(to abi.QPState, a *qpstate.Attr) error {
	q := d.q
	va := verbs.QPAttr{State: uint32(to)}
	switch to {
	case abi.QPStateInit:
		va.Access = uint32(a.AccessFlags & (abi.AccessLocalWrite | abi.AccessRemoteWrite | abi.AccessRemoteRead | abi.AccessRemoteAtomic))
	case abi.QPStateRTR:
		mtu := a.PathMTU
		if !mtu.Valid() {
			mtu = q.adapter.PortMTU()
		}
		if active := q.adapter.PortMTU(); mtu > active {
			// The device would take it (rxe checks the port's largest
			// MTU only) and then send packets its netdev cannot carry.
			return fmt.Errorf("%w: path MTU %v is over %s's active MTU %v: give %v or less (ibv_query_port's active_mtu)",
				qpstate.ErrInvalidAttr, mtu, d.u.Name, active, active)
		}
		va.PathMTU, va.DestQPN, va.RQPSN = uint32(mtu), a.DestQPN, a.RQPSN
		va.DGID, va.SGIDIndex, va.HopLimit, va.TrafficClass, va.FlowLabel, va.SL = a.AV.DGID, a.AV.SGIDIndex, a.AV.HopLimit, a.AV.TrafficClass, a.AV.FlowLabel, a.AV.SL
		va.IsGlobal = true // RoCE: a GRH always
		va.MaxDestRdAtomic, va.MinRNRTimer = a.MaxDestRdAtomic, a.MinRNRTimer
		if va.MaxDestRdAtomic == 0 {
			va.MaxDestRdAtomic = 1
		}
	case abi.QPStateRTS:
		va.SQPSN, va.Timeout, va.RetryCnt, va.RNRRetry, va.MaxRdAtomic = a.SQPSN, a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRdAtomic
		if va.MaxRdAtomic == 0 {
			va.MaxRdAtomic = 1
		}
	}
	if err := d.u.dev.ModifyQP(d.qp, va); err != nil {
		return fmt.Errorf("QP %#x on %s to %v: %w", q.qpn, d.u.Name, to, err)
	}
	return nil
}

// hasWork reports, without locks, whether the runner has requests to
// forward: receives from INIT on (a device takes them before the QP is
// connected), sends in RTS.
func (d *devQP) hasWork(mem []byte) bool {
	q := d.q
	// A QP on an SRQ has no receive ring of its own: the SRQ's runner
	// forwards what is posted to it (device_srq.go).
	recvs := !q.srq && q.rq.pending(mem)
	switch q.State() {
	case abi.QPStateInit, abi.QPStateRTR:
		return recvs && !d.slots.rwait.Load()
	case abi.QPStateRTS:
		// A runner waiting for room has work once a completion makes
		// some (it kicks the worker).
		return (recvs && !d.slots.rwait.Load()) ||
			(shm.Load32(mem, abi.RingProdOff) != q.sqConsPub.Load() && !d.slots.swait.Load())
	case abi.QPStateErr:
		return recvs || shm.Load32(mem, abi.RingProdOff) != q.sqConsPub.Load()
	}
	return false
}

// process runs a device QP once under procMu (the device branch of
// the QP's one send-queue runner, QP.process): what the client
// posted goes to the device, each queue's pending requests as one batch
// (one message to the helper, one doorbell of the device) per MaxBatch.
func (d *devQP) process(st abi.QPState) (time.Duration, bool) {
	q := d.q
	if d.errSet {
		st = abi.QPStateErr // moved to ERR on the device; Modify is about to say so
	}
	switch st {
	case abi.QPStateErr:
		if !d.errSet {
			// A QP the engine failed (an overflowed CQ): its device QP
			// stops too, and flushes what it holds. A QP the device
			// failed (an error completion or event) is moved too: it
			// may have been handed receives after it entered ERR and
			// before the engine knew, which rxe would keep for ever; the
			// transition makes it flush them. A device gone is not asked.
			if d.u.Down() == nil {
				_ = d.u.dev.ModifyQP(d.qp, verbs.QPAttr{State: uint32(abi.QPStateErr)})
			}
			d.errSet = true
		}
		return 0, q.flush() // what was never posted to the device
	case abi.QPStateInit, abi.QPStateRTR, abi.QPStateRTS:
	default:
		return 0, false
	}
	worked := false
	if !q.srq {
		worked = d.postRecvs() // an SRQ's runner posts its own (device_srq.go)
	}
	if st == abi.QPStateRTS {
		worked = d.postSends() || worked
	}
	return 0, worked
}

// HandPostedRecvs hands the receives posted to q so far to its device QP
// now, as its runner would on its next turn, and returns once the device
// has them. The connection manager calls it before it tells a peer of q
// (a SIDR reply, a connection's request or reply): the peer may send at
// once, and a device's UD QP drops a datagram that arrives before a
// receive is there (an RC QP would answer RNR). It does nothing for a QP
// not on a device, one on an SRQ, or one in no state to receive.
func (q *QP) HandPostedRecvs() {
	d := q.dev
	if d == nil || q.srq {
		return
	}
	q.procMu.Lock()
	defer q.procMu.Unlock()
	switch q.State() {
	case abi.QPStateInit, abi.QPStateRTR, abi.QPStateRTS:
		if !d.errSet && !q.devErr.Load() {
			d.postRecvs()
		}
	}
}

// postRecvs forwards the posted receive requests.
func (d *devQP) postRecvs() bool {
	q := d.q
	s := &q.s
	worked := false
	for {
		d.recvs = d.recvs[:0]
		nsge := 0
		room := min(d.slots.recvRoom(), verbs.MaxBatch)
		for len(d.recvs) < room {
			r := q.rq.pop(&s.rwqe)
			if r == popEmpty {
				break
			}
			worked = true
			if r == popCorrupt {
				q.Fail(abi.EventQPFatal, "the receive queue's producer index is corrupt")
				return true
			}
			var sg []verbs.SGE
			ok := r == popOK
			if ok {
				sg, ok = d.translate(s.rwqe.SGL[:s.rwqe.NumSGE], d.sges[nsge:nsge:len(d.sges)])
			}
			if !ok {
				d.postRecvBatch()
				c := abi.CQE{WRID: s.rwqe.WRID, QPNum: q.qpn, Opcode: abi.WCRecv, Status: abi.StatusLocProtErr}
				q.recvCQ.push(&c)
				q.Fail(abi.EventQPFatal, "a receive request names memory not registered with the device")
				return true
			}
			nsge += len(sg)
			d.recvs = append(d.recvs, verbs.RecvWR{WRID: d.slots.noteRecv(len(d.recvs), s.rwqe.WRID), SGEs: sg})
		}
		if len(d.recvs) == 0 {
			return worked
		}
		if !d.postRecvBatch() {
			return true
		}
	}
}

func (d *devQP) postRecvBatch() bool {
	q := d.q
	if len(d.recvs) == 0 {
		return true
	}
	d.slots.handRecvs(len(d.recvs))
	if err := d.u.dev.PostRecv(d.qp, d.recvs); err != nil {
		d.slots.unhandRecvs(len(d.recvs))
		if !d.deviceGone(err) {
			q.Fail(abi.EventQPFatal, "the device refused its receive requests: "+err.Error())
		}
		// The client took them for posted: they complete, flushed.
		for i := range d.recvs {
			c := abi.CQE{WRID: d.slots.rwrid[(d.slots.rposted+uint32(i))&uint32(len(d.slots.rwrid)-1)], QPNum: q.qpn, Opcode: abi.WCRecv, Status: abi.StatusWRFlushErr}
			q.recvCQ.push(&c)
		}
		return false
	}
	return true
}

// postSends forwards the posted send requests. A request the
// engine cannot put on the device (memory not registered with it, an
// opcode the device path lacks) completes with an error after those
// before it are posted, and the QP goes to ERR as on a device. The
// requests' slots are freed as the device completes them (device_slots.go).
func (d *devQP) postSends() bool {
	q := d.q
	s := &q.s
	worked := false
	for {
		prod := shm.Load32(q.mem, abi.RingProdOff)
		n, err := q.sq.Pending(prod, q.sqCons)
		if err != nil {
			q.Fail(abi.EventQPFatal, "the send queue's producer index is corrupt")
			return true
		}
		if n == 0 {
			return worked
		}
		room := d.slots.sendRoom(q.sqCons)
		if room == 0 {
			// The client posted past the free index (it ignored the
			// consumer word): what it posted waits for completions.
			return worked
		}
		worked = true
		d.sends, d.udSends, d.inl = d.sends[:0], d.udSends[:0], d.inl[:0]
		nsge, body, nb := 0, 8, 0
		start := q.sqCons
		bad := abi.StatusSuccess
		for ; n > 0 && nb < min(verbs.MaxBatch, room); n-- {
			off := q.sq.Entry(q.sqCons)
			copy(s.entry, q.mem[off:off+q.sq.Stride])
			w := &s.wqe
			if perr := abi.ParseSendWQE(s.entry, w, q.typ, q.caps.MaxSendSGE, q.caps.MaxInlineData); perr != nil {
				bad = abi.StatusLocQPOpErr
				if perr == abi.ErrInlineLen {
					bad = abi.StatusLocLenErr
				}
				break
			}
			inline := w.Flags&abi.SendInline != 0
			if w.Opcode > abi.OpAtomicFetchAndAdd || (inline && d.ud) || (inline && w.Opcode != abi.OpSend && w.Opcode != abi.OpSendImm &&
				w.Opcode != abi.OpRDMAWrite && w.Opcode != abi.OpRDMAWriteImm) {
				bad = abi.StatusLocQPOpErr
				break
			}
			need := verbs.SendWRBytes(w.NumSGE, len(w.Inline))
			if body+need > verbs.MaxPostBody {
				break // the message is full: the next batch takes it
			}
			var sg []verbs.SGE
			fl := uint32(w.Flags & (abi.SendFence | abi.SendSignaled | abi.SendSolicited))
			var data []byte
			if inline {
				at := len(d.inl)
				d.inl = append(d.inl, w.Inline...)
				data = d.inl[at:]
				fl |= verbs.SendInline
			} else {
				var ok bool
				if sg, ok = d.translate(w.SGL[:w.NumSGE], d.sges[nsge:nsge:len(d.sges)]); !ok {
					bad = abi.StatusLocProtErr
					break
				}
			}
			nsge += len(sg)
			body += need
			if q.sigAll {
				fl |= uint32(abi.SendSignaled)
			}
			wrid := d.slots.noteSend(q.sqCons, w.WRID, w.Opcode)
			if d.ud {
				uw, st := d.udSendWR(w, sg, fl)
				if st != abi.StatusSuccess {
					bad = st
					break
				}
				uw.WRID = wrid
				d.udSends = append(d.udSends, uw)
			} else {
				d.sends = append(d.sends, verbs.SendWR{WRID: wrid, Opcode: uint32(w.Opcode), Flags: fl, Imm: immToDevice(w), SGEs: sg,
					RemoteAddr: w.RemoteAddr, RKey: w.RKey, CompareAdd: w.CompareAdd, Swap: w.Swap, Inline: data})
			}
			nb++
			q.sqCons++
		}
		if nb > 0 {
			// The device may complete the batch before the post returns:
			// the push reader must know the requests first.
			d.slots.handSends(q.sqCons)
			q.sqConsPub.Store(q.sqCons)
			if d.ud {
				err = d.u.dev.PostSendUD(d.qp, d.udSends)
			} else {
				err = d.u.dev.PostSend(d.qp, d.sends)
			}
			if err != nil {
				// Nothing of the batch was posted: its requests complete
				// here, the first with the error, as a device's would;
				// all flushed if the device is gone (after what it held).
				d.slots.unhandSends(start)
				gone := d.deviceGone(err)
				if !gone {
					q.Fail(abi.EventQPFatal, "the device refused its send requests: "+err.Error())
				}
				for i := range nb {
					st := abi.StatusWRFlushErr
					if i == 0 && !gone {
						st = abi.StatusLocQPOpErr
					}
					m := uint32(len(d.slots.swrid) - 1)
					j := (start + uint32(i)) & m
					c := abi.CQE{WRID: d.slots.swrid[j], QPNum: q.qpn, Opcode: d.slots.sop[j].CompletionOpcode(), Status: st}
					q.sendCQ.push(&c)
				}
				q.publishSQCons()
				q.publishSQDone()
				return true
			}
			// The device moves these bytes: counted as moved, not copied.
			var moved uint64
			for _, g := range d.sges[:nsge] {
				moved += uint64(g.Length)
			}
			q.adapter.Counters.PathVerbs.Add(uint64(nb))
			q.adapter.Counters.VerbsBytes.Add(moved)
		}
		if bad != abi.StatusSuccess {
			q.sqCons++
			q.publishSQCons()
			q.adapter.Counters.TxErrors.Add(1)
			q.Fail(abi.EventQPFatal, "a send request the device path cannot carry")
			c := abi.CQE{WRID: s.wqe.WRID, QPNum: q.qpn, Opcode: s.wqe.Opcode.CompletionOpcode(), Status: bad}
			q.sendCQ.push(&c)
			q.publishSQDone()
			return true
		}
	}
}

// translate turns the client's SGEs (its addresses, the device's lkeys)
// into the helper's (region handle and offset), appending to out; false
// when one names no region of the QP's PD or leaves it.
func (d *devQP) translate(in []abi.SGE, out []verbs.SGE) ([]verbs.SGE, bool) {
	q := d.q
	return q.adapter.translateOnDevice(q.pd, in, out)
}

// translateOnDevice is translate for the requests of pd's queues (a QP's
// or an SRQ's).
func (a *Adapter) translateOnDevice(pd *PD, in []abi.SGE, out []verbs.SGE) ([]verbs.SGE, bool) {
	if len(in) > verbs.MaxWRSGE || len(out)+len(in) > cap(out) {
		return out, false
	}
	for _, g := range in {
		if g.Length == 0 {
			continue
		}
		m := a.deviceMR(g.LKey)
		if m == nil || m.pd != pd || m.dev == nil || g.Addr < m.addr || g.Addr-m.addr > m.length || uint64(g.Length) > m.length-(g.Addr-m.addr) {
			return out, false
		}
		out = append(out, verbs.SGE{MR: m.dev.mr.Handle, Length: g.Length, Offset: m.dev.skew + g.Addr - m.addr})
	}
	return out, true
}
