package engine

// The rdma path: a QP whose destination is on another host runs the
// InfiniBand transport (package transport) over one of the host's links.
// The transport's Env is implemented here on the QP's memory, queues and
// completion queues.

import (
	"net/netip"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/transport"
	"github.com/vrdma/vrdma/internal/wire"
)

// wirePath is how packets of a QP leave: the link, the addresses of its
// source and destination GIDs, the UDP source port, the TOS byte.
type wirePath struct {
	link     Link
	src, dst netip.Addr
	sport    uint16
	tos      uint8
	tcp      bool // the TCP channel, for the path counters
	// group: the sending QP's tenant, put in front of a multicast
	// datagram on a link that carries tenants (mcast_tenant.go); "" for
	// everything else.
	group string
}

// remote is a QP's state on the rdma path. It is owned by whoever holds
// the QP's procMu: the worker, the poller or a link's receiver.
type remote struct {
	q     *QP
	tp    *transport.QP
	path  wirePath // RC/UC: the connection's; UD: set per datagram
	wired bool     // RC/UC: the destination is reached over a link

	// Per send slot: the resolved local spans and the regions they pin,
	// kept until the request completes.
	spans [][][]byte
	held  [][]*MR

	inline [][]byte // per slot: a copy of inline data

	recvSpans [][]byte
	recvHeld  []*MR
	callHeld  []*MR // regions pinned during one call into the transport

	tx   txBatch // the worker's frames
	cur  *txBatch
	grh  [abi.GRHSize]byte
	udSt abi.Status // UD: the status a datagram completed with
	udOn bool       // UD: completions are taken by the poster
	wqe  transport.WQE
	mtu  uint32

	// An XRC target's SRQ: the one the request being received named
	// (SelectSRQ), and the one the receive in progress was taken from.
	xsrq, recvSRQ *RQ
}

var ipID atomic.Uint32

// nextIPID returns a non-zero IPv4 Identification: the kernel replaces 0
// with one of its own, which the ICRC computed here would not cover.
func nextIPID() uint16 {
	for {
		if id := uint16(ipID.Add(1)); id != 0 {
			return id
		}
	}
}

func gidAddr(g [16]byte) netip.Addr { return netip.AddrFrom16(g).Unmap() }

func addrGID(a netip.Addr) [16]byte { return a.As16() }

// rxeSourcePort is the UDP source port rxe gives an RC or UC connection:
// from the flow label, or from the two QPNs when it is 0.
func rxeSourcePort(lqpn, rqpn, flowLabel uint32) uint16 {
	fl := flowLabel & 0xfffff
	if fl == 0 {
		v := uint64(lqpn) * uint64(rqpn)
		v ^= v >> 20
		v ^= v >> 40
		fl = uint32(v & 0xfffff)
	}
	return uint16((fl&0x3fff)^((fl&0xfc000)>>14)) | 0xc000
}

// rxeUDSourcePort is the UDP source port rxe gives a UD QP.
func rxeUDSourcePort(qpn uint32) uint16 {
	return uint16(0xc000 + ((qpn * 0x61c88647) >> 18))
}

func (h *Host) tos(l Link) uint8 {
	if d, ok := l.(interface{ DSCP() uint8 }); ok {
		return d.DSCP() << 2
	}
	return 0
}

// setupWire runs after a transition to RTR or RTS (under q.mu): it gives
// the QP a transport when its packets may travel over a link.
func (q *QP) setupWire(to abi.QPState, a *qpstate.Attr) {
	h := q.adapter.host
	if h == nil {
		return
	}
	q.procMu.Lock()
	defer q.procMu.Unlock()
	if q.dead {
		return
	}
	cfg := transport.Config{
		Type: q.typ, QPN: q.qpn, DestQPN: a.DestQPN, MTU: uint32(pathMTU(a.PathMTU, q.adapter.PortMTU())),
		SendCap: q.caps.MaxSendWR, PKey: DefaultPKey, QKey: a.QKey, Access: a.AccessFlags,
		SQPSN: a.SQPSN, RQPSN: a.RQPSN, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry,
		MinRNRTimer: a.MinRNRTimer, MaxRdAtomic: int(a.MaxRdAtomic), MaxDestRdAtomic: MaxRdAtomic,
		XRC: q.xrc != xrcNone,
	}
	if q.typ == abi.QPTypeUD {
		cfg.MTU = uint32(q.adapter.PortMTU().Bytes())
	}
	if q.rm != nil {
		if to == abi.QPStateRTS {
			q.rm.tp.Ready(cfg)
		} else {
			q.rm.tp.Update(cfg)
		}
		return
	}
	if to != abi.QPStateRTR && to != abi.QPStateRTS {
		return
	}
	rm := &remote{q: q, tp: transport.New(cfg), mtu: cfg.MTU}
	rm.tx.errs = &h.txErrors
	if q.typ != abi.QPTypeUD {
		gids := q.adapter.GIDs()
		if h.LookupQP(a.AV.DGID, a.DestQPN) != nil || h.IsLocalGID(a.AV.DGID) || int(a.AV.SGIDIndex) >= len(gids) {
			return // the memcpy path, or no path at all
		}
		sgid := gids[a.AV.SGIDIndex]
		l, kind := h.route(sgid, a.AV.DGID)
		if l == nil {
			return
		}
		src, dst := gidAddr(sgid), gidAddr(a.AV.DGID)
		if src.Is4() != dst.Is4() {
			return
		}
		rm.path = wirePath{link: l, src: src, dst: dst, sport: rxeSourcePort(q.qpn, a.DestQPN, a.AV.FlowLabel), tos: h.tos(l), tcp: kind == PathTCP}
		rm.wired = true
	}
	n := q.caps.MaxSendWR
	rm.spans = make([][][]byte, n)
	rm.held = make([][]*MR, n)
	for i := range rm.spans {
		rm.spans[i] = make([][]byte, 0, q.caps.MaxSendSGE+1)
		rm.held[i] = make([]*MR, 0, q.caps.MaxSendSGE)
	}
	q.rm = rm
}

// dropWire discards the QP's transport (RESET, destroy): requests held are
// dropped without completions, as IBTA's RESET does, and their regions
// released. procMu is held.
func (q *QP) dropWire() {
	rm := q.rm
	if rm == nil {
		return
	}
	q.rm = nil
	for i := range rm.held {
		releaseAll(&rm.held[i])
	}
	releaseAll(&rm.recvHeld)
	releaseAll(&rm.callHeld)
	q.wireDeadline.Store(0)
}

func releaseAll(held *[]*MR) {
	for i, m := range *held {
		m.release()
		(*held)[i] = nil
	}
	*held = (*held)[:0]
}

// resolveHeld resolves a scatter/gather list like scratch.resolve, pinning
// the regions in held.
func resolveHeld(a *Adapter, pd *PD, sgl []abi.SGE, need abi.Access, out [][]byte, held *[]*MR) ([][]byte, uint64, abi.Status) {
	out = out[:0]
	var total uint64
	for _, e := range sgl {
		if e.Length == 0 {
			continue
		}
		mr := a.lookupMR(e.LKey)
		if mr == nil || mr.pd != pd || mr.access&need != need || !mr.acquire() {
			return out, 0, abi.StatusLocProtErr
		}
		*held = append(*held, mr)
		b := mr.span(e.Addr, e.Length)
		if b == nil {
			return out, 0, abi.StatusLocProtErr
		}
		out = append(out, b)
		total += uint64(e.Length)
	}
	if total > 1<<31 {
		return out, 0, abi.StatusLocLenErr
	}
	return out, total, abi.StatusSuccess
}

// process runs an RC or UC send queue over the link: the transport's
// timers, then every posted request the transport has room for (the wire
// branch of the QP's one send-queue runner, QP.process). procMu is held.
func (rm *remote) process() (int64, bool) {
	q := rm.q
	now := nanotime()
	rm.cur = &rm.tx
	defer func() { rm.cur = nil }()
	worked := false
	if d := rm.tp.Deadline(); d != 0 && now >= d {
		rm.tp.Tick(rm, now)
		worked = true
	}
	s := &q.s
	for !rm.tp.Failed() && rm.tp.Room() > 0 && q.State() == abi.QPStateRTS {
		prod := shm.Load32(q.mem, abi.RingProdOff)
		n, err := q.sq.Pending(prod, q.sqCons)
		if err != nil {
			q.Fail(abi.EventQPFatal, "the send queue's producer index is corrupt")
			break
		}
		if n == 0 {
			break
		}
		off := q.sq.Entry(q.sqCons)
		copy(s.entry, q.mem[off:off+q.sq.Stride])
		slot := int(q.sqCons) & (len(rm.spans) - 1)
		st := abi.StatusSuccess
		if perr := abi.ParseSendWQE(s.entry, &s.wqe, q.typ, q.caps.MaxSendSGE, q.caps.MaxInlineData); perr != nil {
			st = abi.StatusLocQPOpErr
			if perr == abi.ErrInlineLen {
				st = abi.StatusLocLenErr
			}
		}
		if st == abi.StatusSuccess && s.wqe.Opcode.IsMW() {
			// Binds and invalidations run here, in order: after what is
			// outstanding.
			if rm.tp.Outstanding() > 0 {
				break
			}
			if st = q.execute(&s.wqe).status; st == abi.StatusSuccess {
				q.sqCons++
				q.publishSQCons()
				if q.sigAll || s.wqe.Flags&abi.SendSignaled != 0 {
					c := abi.CQE{WRID: s.wqe.WRID, QPNum: q.qpn, Opcode: s.wqe.Opcode.CompletionOpcode()}
					q.sendCQ.push(&c)
				}
				q.publishSQDone()
				worked = true
				continue
			}
		}
		if st == abi.StatusSuccess && s.wqe.Opcode == abi.OpSendInv && q.typ != abi.QPTypeRC {
			st = abi.StatusLocQPOpErr // SEND with Invalidate has wire opcodes for RC only
		}
		w := &rm.wqe
		*w = transport.WQE{}
		if st == abi.StatusSuccess {
			st = rm.buildWQE(slot, &s.wqe, w)
		}
		if st != abi.StatusSuccess {
			// A local error completes in order: after what is outstanding.
			if rm.tp.Outstanding() > 0 {
				releaseAll(&rm.held[slot])
				break
			}
			releaseAll(&rm.held[slot])
			q.sqCons++
			q.publishSQCons()
			q.adapter.Counters.TxErrors.Add(1)
			q.enterError() // before the completion is seen, as on the memcpy path
			c := abi.CQE{WRID: s.wqe.WRID, QPNum: q.qpn, Opcode: s.wqe.Opcode.CompletionOpcode(), Status: st}
			q.sendCQ.push(&c)
			q.publishSQDone()
			worked = true
			break
		}
		// Into the transport first, then past the entry: the consumer index
		// published counts the request as outstanding from the start.
		if err := rm.tp.Post(rm, w, now); err != nil {
			break // cannot happen: Room was checked
		}
		q.sqCons++
		q.publishSQCons()
		worked = true
	}
	rm.tx.flush()
	releaseAll(&rm.callHeld)
	d := rm.tp.Deadline()
	q.wireDeadline.Store(d)
	return d, worked
}

// buildWQE resolves a parsed work request's local memory into slot and
// fills the transport's request.
func (rm *remote) buildWQE(slot int, sw *abi.SendWQE, w *transport.WQE) abi.Status {
	q := rm.q
	a := q.adapter
	spans := rm.spans[slot][:0]
	var total uint64
	st := abi.StatusSuccess
	switch {
	case sw.Inline != nil:
		// Inline data lives in the private copy of the entry, which the next
		// request overwrites: keep a copy with the slot.
		buf := append(rm.inlineBuf(slot), sw.Inline...)
		spans = append(spans, buf)
		total = uint64(len(buf))
	case sw.Opcode == abi.OpRDMARead:
		spans, total, st = resolveHeld(a, q.pd, sw.SGL[:sw.NumSGE], abi.AccessLocalWrite, spans, &rm.held[slot])
	case sw.Opcode.IsAtomic():
		if sw.NumSGE != 1 || sw.SGL[0].Length != 8 {
			return abi.StatusLocLenErr
		}
		spans, total, st = resolveHeld(a, q.pd, sw.SGL[:1], abi.AccessLocalWrite, spans, &rm.held[slot])
	case sw.Opcode == abi.OpAtomicWrite:
		// No local memory: the 8 bytes travel in CompareAdd.
		total = 8
	default:
		spans, total, st = resolveHeld(a, q.pd, sw.SGL[:sw.NumSGE], 0, spans, &rm.held[slot])
	}
	if st != abi.StatusSuccess {
		return st
	}
	rm.spans[slot] = spans
	*w = transport.WQE{
		ID: sw.WRID, Op: sw.Opcode, Signaled: q.sigAll || sw.Flags&abi.SendSignaled != 0,
		Fence: sw.Flags&abi.SendFence != 0, Solicited: sw.Flags&abi.SendSolicited != 0,
		Local: spans, Length: uint32(total), RemoteAddr: sw.RemoteAddr, RKey: sw.RKey, Imm: sw.Imm,
		CompareAdd: sw.CompareAdd, Swap: sw.Swap, Tag: slot,
	}
	if q.xrc == xrcINI {
		w.SRQN = sw.RemoteQPN // the work request's remote_srqn
	}
	return abi.StatusSuccess
}

// inlineBuf returns the slot's buffer for inline data, empty.
func (rm *remote) inlineBuf(slot int) []byte {
	if rm.inline == nil {
		rm.inline = make([][]byte, len(rm.spans))
	}
	if rm.inline[slot] == nil {
		rm.inline[slot] = make([]byte, 0, rm.q.caps.MaxInlineData) // what the footprint counted
	}
	return rm.inline[slot][:0]
}

// sendUDWire sends a datagram to another host. The transport completes it
// at once; the caller posts the completion.
func (q *QP) sendUDWire(w *abi.SendWQE, dgid [16]byte, sgidIndex uint8, local [][]byte, total uint64, qkey uint32) outcome {
	rm := q.rm
	h := q.adapter.host
	gids := q.adapter.GIDs()
	if rm == nil || int(sgidIndex) >= len(gids) {
		return outcome{bytes: uint32(total)} // no way out: lost, as on a wire
	}
	sgid := gids[sgidIndex]
	l, kind := h.route(sgid, dgid)
	return rm.sendUDVia(w, l, kind, gidAddr(sgid), dgid, local, total, qkey)
}

// sendUDVia sends a datagram to dgid on link l (of path kind) from src.
func (rm *remote) sendUDVia(w *abi.SendWQE, l Link, kind string, src netip.Addr, dgid [16]byte, local [][]byte, total uint64, qkey uint32) outcome {
	q := rm.q
	h := q.adapter.host
	dst := gidAddr(dgid)
	if l == nil || src.Is4() != dst.Is4() {
		return outcome{bytes: uint32(total)}
	}
	rm.path = wirePath{link: l, src: src, sport: rxeUDSourcePort(q.qpn), tos: h.tos(l), tcp: kind == PathTCP,
		group: q.groupTag(l, dgid)}
	rm.cur = &rm.tx
	rm.udOn, rm.udSt = true, abi.StatusSuccess
	wq := &rm.wqe
	*wq = transport.WQE{ID: w.WRID, Op: w.Opcode, Imm: w.Imm, Local: local, Length: uint32(total), Dest: dst, DestQPN: w.RemoteQPN, QKey: qkey,
		Solicited: w.Flags&abi.SendSolicited != 0}
	_ = rm.tp.Post(rm, wq, nanotime())
	rm.udOn, rm.cur = false, nil
	rm.tx.flush()
	return outcome{bytes: uint32(total), status: rm.udSt}
}

// --- transport.Env ---

// Output encodes p into a frame of the current batch.
func (rm *remote) Output(p *wire.Packet, src [][]byte, off, n int) {
	q := rm.q
	path := &rm.path
	p.Src = path.src
	if !p.Dst.IsValid() {
		p.Dst = path.dst
	}
	p.TOS, p.TTL, p.DF = path.tos, 64, true
	if p.Src.Is4() {
		p.IPID = nextIPID()
	}
	p.SrcPort, p.DstPort = path.sport, wire.UDPPort
	b := rm.cur
	if b == nil {
		b = &rm.tx
	}
	frame := b.buffer(path.link)
	tag := 0
	if path.group != "" {
		frame = wire.AppendGroupTag(frame, path.group)
		tag = len(frame)
	}
	frame = wire.AppendHeaders(frame, p, n)
	frame = transport.Gather(frame, src, off, n)
	q.adapter.Counters.CopyBytes.Add(uint64(n))
	// The ICRC covers the IP packet, after the tag; the buffer has room
	// for the trailer, so it is extended in place.
	pkt := wire.AppendTrailer(frame[tag:])
	frame = frame[:tag+len(pkt)]
	b.add(frame)
	q.adapter.Counters.TxPackets.Add(1)
	q.adapter.Counters.TxBytes.Add(uint64(n))
}

// Complete posts a send completion and unpins the request's regions.
func (rm *remote) Complete(w *transport.WQE, st abi.Status) {
	q := rm.q
	if rm.udOn {
		rm.udSt = st
		if st == abi.StatusSuccess {
			rm.countPath(w.Length)
		}
		return
	}
	if w.Tag >= 0 && w.Tag < len(rm.held) {
		releaseAll(&rm.held[w.Tag])
	}
	if st != abi.StatusSuccess && st != abi.StatusWRFlushErr {
		q.adapter.Counters.TxErrors.Add(1)
	}
	if st == abi.StatusSuccess {
		rm.countPath(w.Length)
	}
	if rm.wired {
		// The slot is free once its request completed, and before its
		// completion is seen: a client that posts again on seeing it must
		// find the room.
		q.publishSQCons()
	}
	if st != abi.StatusSuccess && st != abi.StatusWRFlushErr && q.typ != abi.QPTypeUD {
		// The transport stops the QP after an RC or UC request's error
		// (without an event: the completion says it); in ERR before the
		// completion is seen, as on the memcpy path.
		q.enterError()
	}
	if st != abi.StatusSuccess || w.Signaled {
		c := abi.CQE{WRID: w.ID, QPNum: q.qpn, Opcode: w.Op.CompletionOpcode(), Status: st}
		if st == abi.StatusSuccess {
			c.ByteLen = w.Length
		}
		if !q.sendCQ.push(&c) {
			q.Fail(abi.EventQPFatal, "its send completion queue overflowed")
		}
	}
	if rm.wired {
		q.publishSQDone()
	}
}

// TakeRecv pops the next receive request and pins its buffers.
func (rm *remote) TakeRecv(r *transport.Recv) transport.RecvResult {
	q := rm.q
	s := &q.s
	rq, pd := q.rq, q.pd
	if q.xrc == xrcTGT {
		if rm.xsrq == nil {
			return transport.RecvEmpty // not reached: the transport selects first
		}
		rq, pd = rm.xsrq, rm.xsrq.pd // SelectSRQ chose it
		rm.recvSRQ = rm.xsrq
	}
	switch rq.pop(&s.rwqe) {
	case popEmpty:
		return transport.RecvEmpty
	case popCorrupt:
		q.Fail(abi.EventQPFatal, "the receive queue's producer index is corrupt")
		return transport.RecvEmpty
	case popBad:
		r.ID, r.Status = s.rwqe.WRID, abi.StatusLocQPOpErr
		return transport.RecvBad
	}
	releaseAll(&rm.recvHeld)
	spans, total, st := resolveHeld(q.adapter, pd, s.rwqe.SGL[:s.rwqe.NumSGE], abi.AccessLocalWrite, rm.recvSpans[:0], &rm.recvHeld)
	rm.recvSpans = spans
	r.ID, r.Status = s.rwqe.WRID, 0
	if st != abi.StatusSuccess {
		releaseAll(&rm.recvHeld)
		r.Status = st
		return transport.RecvBad
	}
	r.Spans, r.Length = spans, uint32(total)
	return transport.RecvOK
}

// CompleteRecv posts a receive completion and unpins its buffers.
func (rm *remote) CompleteRecv(r *transport.Recv, c *transport.RecvCompletion) {
	q := rm.q
	releaseAll(&rm.recvHeld)
	e := abi.CQE{WRID: r.ID, QPNum: q.qpn, Opcode: c.Opcode, Status: c.Status, ByteLen: c.Bytes, Imm: c.Imm, SrcQP: c.SrcQP, Flags: c.Flags, SL: c.SL}
	if c.Flags&abi.WCWithInv != 0 {
		e.Imm = c.InvRKey // the completion's invalidated_rkey shares the immediate's field
	}
	if c.Status != abi.StatusSuccess {
		e.Flags, e.ByteLen, e.Imm, e.SL = 0, 0, 0, 0
	}
	cq := q.recvCQ
	if q.xrc == xrcTGT {
		if rm.recvSRQ == nil {
			return // no receive was taken
		}
		cq = rm.recvSRQ.cq
	}
	if !cq.push(&e) {
		q.Fail(abi.EventQPFatal, "its receive completion queue overflowed")
	}
}

// Remote resolves an rkey of the QP's PD; the region stays pinned until
// the call into the transport returns.
func (rm *remote) Remote(rkey uint32, va uint64, n uint32, need abi.Access) []byte {
	q := rm.q
	mr := q.adapter.lookupRKey(rkey)
	if !mr.grantsIn(q, rm.respPD(), need) || !mr.acquire() {
		return nil
	}
	rm.callHeld = append(rm.callHeld, mr)
	return mr.span(va, n)
}

// Invalidate unbinds the type 2 window with rkey of the QP's PD, as a
// SEND with Invalidate from the same host does.
func (rm *remote) Invalidate(rkey uint32) bool { return invalidate(rm.q.adapter, rm.respPD(), rkey) }

// respPD is the protection domain the responder works in: an XRC
// target's is that of the SRQ the request named.
func (rm *remote) respPD() *PD {
	if rm.q.xrc == xrcTGT {
		if rm.xsrq == nil {
			return nil
		}
		return rm.xsrq.pd
	}
	return rm.q.pd
}

// SelectSRQ implements transport.XRCEnv for an XRC target.
func (rm *remote) SelectSRQ(n uint32) bool {
	rm.xsrq = rm.q.xrcTarget(n)
	return rm.xsrq != nil
}

// AtomicWrite stores v with one CPU store on the shared mapping.
func (rm *remote) AtomicWrite(t []byte, v uint64) bool {
	if !shm.Aligned8(t, 0) {
		return false
	}
	shm.Store64(t, 0, v)
	return true
}

// Atomic runs a CPU atomic on the shared mapping.
func (rm *remote) Atomic(t []byte, cas bool, compareAdd, swap uint64) (uint64, bool) {
	if !shm.Aligned8(t, 0) {
		return 0, false
	}
	if cas {
		return shm.CompareAndSwap64(t, 0, compareAdd, swap), true
	}
	return shm.FetchAdd64(t, 0, compareAdd), true
}

// countPath counts a message of n bytes sent by the connection's path;
// one with a payload is a copy (its packets were built from memory, or a
// READ's responses put into it; the bytes are counted per packet).
func (rm *remote) countPath(n uint32) {
	c := &rm.q.adapter.Counters
	if rm.path.tcp {
		c.PathTCP.Add(1)
	} else {
		c.PathRDMA.Add(1)
	}
	if n > 0 {
		c.CopyMsgs.Add(1)
	}
}

// GRH returns the GRH area of a UD receive, as rxe fills it.
func (rm *remote) GRH(p *wire.Packet) []byte { return wire.AppendGRH(rm.grh[:0], p) }

// Fail moves the QP to ERR; the worker flushes the transport.
func (rm *remote) Fail(ev abi.EventType, reason string) {
	if ev == transport.NoEvent {
		rm.q.enterError()
		return
	}
	rm.q.Fail(ev, reason)
}

// RNR counts an RNR NAK received.
func (rm *remote) RNR() { rm.q.adapter.Counters.RNRNaks.Add(1) }

// Retransmit counts a go-back-N (an RNR NAK is counted by RNR).
func (rm *remote) Retransmit(cause transport.RetryCause, packets uint32) {
	c := &rm.q.adapter.Counters
	switch cause {
	case transport.RetryTimeout:
		c.AckTimeouts.Add(1)
	case transport.RetryNAK:
		c.SeqNAKs.Add(1)
	case transport.RetryImplied:
		c.ImpliedNAKs.Add(1)
	}
	c.ResentPackets.Add(uint64(packets))
}

// Drop counts a packet the transport discarded.
func (rm *remote) Drop(transport.DropReason) { rm.q.adapter.Counters.RxDrops.Add(1) }
