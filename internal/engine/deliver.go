package engine

// The receive path of the links: decode, verify the ICRC, find the QP by
// number, check what rxe checks (REFERENCE.md §1.11), hand the packet to
// the QP's transport.

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/transport"
	"github.com/vrdma/vrdma/internal/wire"
)

// receiver is one link's receive state: the packet being decoded and the
// frames the transport answers with. It is used by one goroutine.
type receiver struct {
	h    *Host
	link Link
	pkt  wire.Packet
	tx   txBatch
	wire WireCounters
	// intact: the link vouches for its frames' integrity (IntactLink), so
	// their ICRC is not checked again.
	intact bool
	// paced: the link says how much it takes (PacedLink), so the worker
	// may send what the transport held back.
	paced bool
	// tenants: the link carries a multicast datagram's tenant (TenantLink);
	// tenant is the one of the frame being delivered ("" when untagged),
	// kept between frames so that the same tenant costs no allocation.
	tenants bool
	tenant  string

	gsiDatagram GSIDatagram // the one the GSI handler gets, reused
}

// Receiver returns the function a link's Serve calls with each packet.
// It is not safe for concurrent use: one per Serve loop.
func (h *Host) Receiver(l Link) func(frame []byte) {
	return newReceiver(h, l).deliver
}

func newReceiver(h *Host, l Link) *receiver {
	r := &receiver{h: h, link: l}
	if il, ok := l.(IntactLink); ok {
		r.intact = il.FramesIntact()
	}
	_, r.paced = l.(PacedLink)
	if tl, ok := l.(TenantLink); ok {
		r.tenants = tl.CarriesTenants()
	}
	r.tx.errs = &r.wire.TxErrors
	return r
}

// Deliver hands a frame that link l received to the host; l's Serve loop
// calls it (only one goroutine per link).
func (h *Host) Deliver(l Link, frame []byte) {
	h.mu.RLock()
	r := h.receivers[l]
	h.mu.RUnlock()
	if r == nil {
		return // a link that is going away
	}
	r.deliver(frame)
}

func (r *receiver) deliver(frame []byte) {
	h := r.h
	ctr := &r.wire
	ctr.RxPackets.Add(1)
	ctr.RxBytes.Add(uint64(len(frame)))
	p := &r.pkt
	var tagged bool
	if frame, tagged = r.untag(frame); frame == nil {
		ctr.Malformed.Add(1)
		return
	}
	if err := wire.Decode(frame, p); err != nil {
		ctr.Malformed.Add(1)
		return
	}
	if !r.intact && wire.VerifyICRC(frame) != nil {
		ctr.ICRC.Add(1)
		return
	}
	if p.Dst.IsMulticast() {
		r.deliverMcast(p)
		return
	}
	if tagged { // a tag is for groups only
		ctr.Malformed.Add(1)
		return
	}
	if !h.isLinkGID(addrGID(p.Dst)) {
		ctr.NotOurs.Add(1)
		return
	}
	if p.PKey&0x7fff != DefaultPKey&0x7fff {
		ctr.BadKey.Add(1)
		return
	}
	if p.DestQP == GSIQPN {
		r.deliverGSI(p)
		return
	}
	q := h.qp(p.DestQP)
	if q == nil || !q.accepts(p) {
		ctr.UnknownQP.Add(1)
		return
	}
	r.toQP(q, p)
}

// toQP hands p to q's transport, which accepts its type and state.
func (r *receiver) toQP(q *QP, p *wire.Packet) {
	h := r.h
	ctr := &r.wire
	if !q.adapter.NativeEndpoint && h.IsOutsider(addrGID(p.Src)) {
		ctr.Outsiders.Add(1)
		return
	}
	q.procMu.Lock()
	rm := q.rm
	if q.dead || rm == nil || (q.typ != abi.QPTypeUD && (!rm.wired || p.Src != rm.path.dst || p.Dst != rm.path.src)) {
		// RC and UC take packets only from their connection's addresses.
		q.procMu.Unlock()
		ctr.UnknownQP.Add(1)
		return
	}
	q.adapter.Counters.RxPackets.Add(1)
	q.adapter.Counters.RxBytes.Add(uint64(len(p.Payload)))
	q.adapter.Counters.CopyBytes.Add(uint64(len(p.Payload))) // the transport puts it into memory
	before := rm.tp.Deadline()
	room := rm.tp.Room()
	rm.cur = &r.tx
	if q.typ == abi.QPTypeUD {
		// Answers go back the way the datagram came (UD has none, but keep
		// the path consistent for the GRH and counters).
		rm.path.link = r.link
	}
	rm.tp.Receive(rm, p, nanotime())
	rm.cur = nil
	releaseAll(&rm.callHeld)
	after := rm.tp.Deadline()
	q.wireDeadline.Store(after)
	// Wake the worker when it must act: a timer is due sooner than the one it
	// sleeps for, or the transport freed room for requests waiting in the
	// ring, or the QP failed. A timer cancelled or moved later (an ACK came)
	// needs no wake-up: the worker wakes at the old time, finds nothing due
	// and sleeps again — once, where a wake-up per ACK cost a hand-off per
	// message.
	kick := timerSooner(before, after) || room == 0 && rm.tp.Room() > 0 || rm.tp.Failed()
	if r.paced {
		// Out before the worker may send more of the same READ's responses
		// (Tick resumes answers the link had no room for): in PSN order.
		r.tx.flush()
	}
	q.procMu.Unlock()
	r.tx.flush()
	if kick {
		q.kickWorker()
	}
}

// accepts reports whether q takes packets like p: the opcode's transport
// matches the QP's type, and its state receives.
func (q *QP) accepts(p *wire.Packet) bool {
	var want wire.Opcode
	switch q.typ {
	case abi.QPTypeRC:
		want = wire.TransportRC
		if q.xrc != xrcNone {
			// An initiator takes only responses, a target only requests.
			f := p.Opcode.Flags()
			if q.xrc == xrcINI && f&wire.IsRequest != 0 || q.xrc == xrcTGT && f&wire.IsResponse != 0 {
				return false
			}
			want = wire.TransportXRC
		}
	case abi.QPTypeUC:
		want = wire.TransportUC
	default:
		want = wire.TransportUD
	}
	if p.Opcode.Transport() != want {
		return false
	}
	switch q.State() {
	case abi.QPStateRTR:
		return p.Opcode.Flags()&wire.IsRequest != 0 // responses need a requester
	case abi.QPStateRTS, abi.QPStateSQD, abi.QPStateSQE:
		return true
	}
	return false
}

// isLinkGID reports whether gid is one of the links' GIDs.
func (h *Host) isLinkGID(gid [16]byte) bool {
	if g := h.linkGIDs.Load(); g != nil {
		for _, x := range *g {
			if x == gid {
				return true
			}
		}
	}
	return false
}

var _ transport.Env = (*remote)(nil)

// timerSooner reports whether a transport deadline that went from before to
// after (nanotime; 0 = none) now fires sooner than a sleeper armed for
// before would wake.
func timerSooner(before, after int64) bool {
	return after != 0 && (before == 0 || after < before)
}
