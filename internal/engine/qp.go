package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
)

// QPConfig is what creating a QP needs.
type QPConfig struct {
	PD     *PD
	Type   abi.QPType
	SendCQ *CQ
	RecvCQ *CQ
	SRQ    *RQ // nil: the QP has its own receive queue
	// XRCD is an XRC_RECV QP's domain (it has no PD, CQs or queues); an
	// XRC_SEND QP has none, and needs no receive CQ.
	XRCD   *XRCD
	SigAll bool
	Caps   proto.QPCaps
	Handle uint32
	Events EventSink
	// AH resolves a UD work request's address handle to its destination GID,
	// source GID index and protection domain.
	AH func(handle uint32) ([16]byte, uint8, *PD, bool)
	// Scope names the tenant whose multicast groups the QP sees (mcast.go):
	// QPs of one scope share groups, QPs of two never do.
	Scope string
}

// dataAttrs is the part of a QP's attributes the data path reads, replaced
// whole on every modify so that workers read it without locks.
type dataAttrs struct {
	dgid        [16]byte
	sgidIndex   uint8
	dqpn        uint32
	qkey        uint32
	access      abi.Access
	mtu         int
	timeout     uint8
	retryCnt    uint8
	rnrRetry    uint8
	minRNRTimer uint8
}

// QP is a queue pair.
type QP struct {
	Handle uint32
	Events EventSink

	adapter *Adapter
	pd      *PD
	typ     abi.QPType // RC for XRC QPs, whose transport is RC's
	apiType abi.QPType // what the client created
	xrc     xrcRole
	xrcd    *XRCD // xrcTGT's domain
	qpn     uint32
	sendCQ  *CQ
	recvCQ  *CQ
	rq      *RQ // own or shared
	srq     bool
	sigAll  bool
	caps    proto.QPCaps
	ah      func(uint32) ([16]byte, uint8, *PD, bool)
	scope   string     // multicast scope (QPConfig.Scope)
	mcast   []groupKey // the groups the QP is attached to; under its host's mc.mu

	footprint uint64 // bytes the daemon allocates for the QP (footprint.go)
	region    *shm.Region
	mem       []byte
	memMu     sync.Mutex // a leaf lock: held by release while it unmaps mem, and by writers that are not the worker
	revokeGen uint32     // the last revoke generation published (revoke.go); under memMu
	sq        abi.RingLayout
	rqRing    abi.RingLayout
	doorbell  *shm.Doorbell
	ownBell   bool

	state atomic.Uint32 // abi.QPState
	dp    atomic.Pointer[dataAttrs]
	kick  atomic.Bool // a state change the worker must act on
	// armed counts the send ring's armings: the notify word holds the
	// latest (never 0), so a client that rang for one need not ring again
	// until it changes (armValue).
	armed atomic.Uint32

	mu   sync.Mutex // serialises modifies; guards attr
	attr qpstate.Attr

	// Owned by whoever holds procMu (the worker or the poller).
	procMu       sync.Mutex
	dead         bool
	sqCons       uint32
	sqConsPub    atomic.Uint32 // sqCons, for hasWork: the shared word is the client's to scribble on
	stallUntil   atomic.Int64  // nanotime; 0 = not stalled
	stallLeft    int           // retries left for the WQE at sqCons; -1 = not started
	stallRNR     bool
	s            scratch
	rm           *remote      // the rdma path's state; nil on the memcpy path
	dev          *devQP       // the device's QP on a bound adapter (device_qp.go); nil otherwise
	devErr       atomic.Bool  // the device reported an error completion: its QP is in ERR
	wireDeadline atomic.Int64 // the transport's next timer (nanotime); 0 = none

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// NewQP creates a QP, assigns its number and starts its worker.
func NewQP(cfg QPConfig) (*QP, error) {
	typ, role := cfg.Type, xrcNone
	switch cfg.Type {
	case abi.QPTypeXRCSend:
		typ, role = abi.QPTypeRC, xrcINI
		if cfg.SRQ != nil || cfg.XRCD != nil {
			return nil, fmt.Errorf("an XRC_SEND QP only sends: it takes no shared receive queue and no XRC domain")
		}
		if cfg.RecvCQ == nil {
			cfg.RecvCQ = cfg.SendCQ // never completes anything
		}
	case abi.QPTypeXRCRecv:
		typ, role = abi.QPTypeRC, xrcTGT
		if cfg.XRCD == nil {
			return nil, fmt.Errorf("an XRC_RECV QP needs an XRC domain")
		}
		if cfg.SRQ != nil {
			return nil, fmt.Errorf("an XRC_RECV QP receives into the XRC SRQ each request names: it takes no shared receive queue")
		}
		cfg.Caps = proto.QPCaps{} // no queues of its own
	default:
		if !cfg.Type.Valid() {
			return nil, fmt.Errorf("QP type %d is not RC (2), UC (3), UD (4), XRC_SEND (9) or XRC_RECV (10)", cfg.Type)
		}
	}
	var a *Adapter
	switch {
	case role == xrcTGT:
		a, cfg.PD = cfg.XRCD.adapter, nil
	case cfg.PD == nil:
		return nil, fmt.Errorf("a %v QP needs a protection domain", cfg.Type)
	default:
		a = cfg.PD.adapter
	}
	if role != xrcTGT && cfg.SendCQ == nil || role == xrcNone && cfg.RecvCQ == nil {
		return nil, fmt.Errorf("a %v QP needs its completion queues", cfg.Type)
	}
	if cfg.SRQ != nil && cfg.SRQ.pd != cfg.PD {
		return nil, fmt.Errorf("the shared receive queue belongs to another protection domain")
	}
	if cfg.SRQ != nil && cfg.SRQ.xrcd != nil {
		return nil, fmt.Errorf("an XRC SRQ receives through XRC_RECV QPs only")
	}
	sh, err := shapeQP(cfg.Caps, cfg.SRQ != nil || role != xrcNone)
	if err != nil {
		return nil, err
	}
	c := sh.caps
	q := &QP{
		Handle: cfg.Handle, Events: cfg.Events,
		adapter: a, pd: cfg.PD, typ: typ, apiType: cfg.Type, xrc: role, sendCQ: cfg.SendCQ, recvCQ: cfg.RecvCQ,
		sigAll: cfg.SigAll, ah: cfg.AH, scope: cfg.Scope, stallLeft: -1,
		sq: sh.sq, rqRing: sh.rq, caps: c, footprint: sh.bytes(),
	}
	region, err := shm.NewRegion("vrdma-qp", sh.size)
	if err != nil {
		return nil, err
	}
	q.region, q.mem = region, region.Bytes()
	switch {
	case role != xrcNone:
		// No receive queue: an initiator never receives requests, a target
		// receives into the SRQ each names. A detached one stands in.
		q.rq, q.srq = &RQ{}, true
		if role == xrcTGT {
			q.xrcd = cfg.XRCD
		}
	case cfg.SRQ == nil:
		q.rq = newRQ(q.mem, q.rqRing, c.MaxRecvSGE, cfg.PD)
	default:
		q.rq, q.srq = cfg.SRQ, true
		cfg.SRQ.Use()
	}
	q.s.init(q.sq.Stride)
	if a.Uplink() != nil {
		if err := createDevQP(q, &cfg); err != nil {
			if q.srq && role == xrcNone {
				cfg.SRQ.Unuse()
			}
			region.Close()
			return nil, err
		}
		q.footprint += uint64(sh.deviceBytes(q.dev.ud)) // PD.QPBytes
		if !q.srq {
			// The client rings after posting receives: the device needs
			// them before the peer's messages arrive (an SRQ's ring has
			// its own notify word: device_srq.go).
			shm.Store32(q.mem, q.rqRing.Offset+abi.RingNotifyOff, 1)
		}
	}
	if a.poller != nil {
		q.doorbell = a.poller.bell
	} else {
		if q.doorbell, err = shm.NewDoorbell(); err != nil {
			q.dev.destroy()
			region.Close()
			return nil, err
		}
		q.ownBell = true
	}
	q.dp.Store(&dataAttrs{mtu: a.ActiveMTU.Bytes()})
	q.attr.PathMTU = a.ActiveMTU
	q.attr.PortNum = 1
	if err := a.addQP(q); err != nil {
		q.dev.destroy()
		q.release()
		return nil, err
	}
	if q.sendCQ != nil {
		q.sendCQ.Use()
		q.recvCQ.Use()
	}
	if q.xrcd != nil {
		q.xrcd.use()
	}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.done = make(chan struct{})
	if a.poller == nil {
		go q.run()
	} else {
		close(q.done)
	}
	return q, nil
}

// QPN returns the queue pair number; Caps the capabilities granted.
func (q *QP) QPN() uint32        { return q.qpn }
func (q *QP) Caps() proto.QPCaps { return q.caps }
func (q *QP) Type() abi.QPType   { return q.apiType }
func (q *QP) State() abi.QPState { return abi.QPState(q.state.Load()) }
func (q *QP) RegionFD() int      { return q.region.FD() }

// ShareDoorbell returns a new write-only descriptor of the QP's doorbell for
// the client, which can ring it but not read wake-ups away; the caller
// closes it once passed.
func (q *QP) ShareDoorbell() (int, error) { return q.doorbell.ShareWriter() }
func (q *QP) Size() int                   { return len(q.mem) }
func (q *QP) SQ() abi.RingLayout          { return q.sq }
func (q *QP) RQ() abi.RingLayout          { return q.rqRing }
func (q *QP) Adapter() *Adapter           { return q.adapter }
func (q *QP) PD() *PD                     { return q.pd }
func (q *QP) SendCQ() *CQ                 { return q.sendCQ }
func (q *QP) RecvCQ() *CQ                 { return q.recvCQ }
func (q *QP) SRQ() *RQ {
	if q.srq && q.xrc == xrcNone {
		return q.rq
	}
	return nil
}

// Attr returns a copy of the QP's attributes.
func (q *QP) Attr() qpstate.Attr {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := q.attr
	a.State = q.State()
	return a
}

func (q *QP) destination() ([16]byte, uint32) {
	d := q.dp.Load()
	return d.dgid, d.dqpn
}

// Path says how the QP's destination is reached from here.
func (q *QP) Path() (path, reason string) {
	if q.typ == abi.QPTypeUD {
		return "per datagram", "UD: memcpy to address handles on this host, RoCEv2 over a link to others"
	}
	if q.State() < abi.QPStateRTR {
		return "", ""
	}
	dgid, dqpn := q.destination()
	h := q.adapter.host
	if h == nil {
		return "unreachable", "the adapter is not attached to a host"
	}
	if p := h.LookupQP(dgid, dqpn); p != nil || h.IsLocalGID(dgid) {
		if p != nil && q.typ == abi.QPTypeRC && q.xrc == xrcNone && p.adapter.Trusts(q.adapter) {
			return "memcpy", "same host, trusted: one-sided operations run in the initiator"
		}
		return "memcpy", "same host"
	}
	q.procMu.Lock()
	rm := q.rm
	var link string
	tcp := false
	if rm != nil && rm.wired {
		link, tcp = rm.path.link.Name(), rm.path.tcp
	}
	q.procMu.Unlock()
	if tcp {
		return "tcp", "IBTA packets over the TCP channel (link " + link + ")"
	}
	if link != "" {
		return "rdma", "RoCEv2 over link " + link
	}
	if len(h.Links()) == 0 {
		return "unreachable", "the destination GID is not on this host and the host has no link: add one with `vrdma link add NAME type rxe netdev IFACE`"
	}
	return "unreachable", "the QP's source GID (sgid_index) is not an address of a link, or its address family differs from the destination's"
}

// Peer returns the local QP this RC/UC QP is connected to, if it is live
// and connected back; nil otherwise.
func (q *QP) Peer() *QP {
	if q.typ == abi.QPTypeUD {
		return nil
	}
	return q.peer(q.dp.Load())
}

// Direct reports whether q may execute one-sided operations itself: an RC
// QP in RTS whose peer is on this host, connected back, on an adapter that
// trusts q's.
func (q *QP) Direct() bool {
	if q.typ != abi.QPTypeRC || q.xrc != xrcNone || q.State() != abi.QPStateRTS {
		return false
	}
	p := q.Peer()
	return p != nil && p.adapter.Trusts(q.adapter)
}

// DirectCapable reports whether q's destination is an adapter on this host
// that trusts q's: the library may then ask for mappings (MapMR), which
// succeed once the peer QP is connected back.
func (q *QP) DirectCapable() bool {
	if q.typ != abi.QPTypeRC || q.xrc != xrcNone || q.State() != abi.QPStateRTS || q.adapter.host == nil {
		return false
	}
	dgid, dqpn := q.destination()
	p := q.adapter.host.LookupQP(dgid, dqpn)
	return p != nil && p.adapter.Trusts(q.adapter)
}

// PeerAccess returns the access flags a connected peer grants remote sides.
func (q *QP) PeerAccess() abi.Access { return q.dp.Load().access }

// LookupMR returns the live region with key on q's adapter if it belongs to
// q's protection domain.
func (q *QP) LookupMR(key uint32) *MR {
	m := q.adapter.lookupMR(key)
	if m == nil || m.pd != q.pd {
		return nil
	}
	return m
}

// Modify applies a state transition after checking it against the IBTA
// state machine and the device limits.
func (q *QP) Modify(attr *qpstate.Attr, mask qpstate.Mask) (abi.QPState, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cur := q.State()
	lim := qpstate.Limits{PKeyTableLen: PKeyTable, GIDTableLen: min(len(q.adapter.GIDs()), GIDTable), MaxRdAtomic: MaxRdAtomic}
	to, err := qpstate.Check(q.apiType, cur, attr, mask, lim)
	if err != nil {
		return cur, err
	}
	prevAttr, prevDP := q.attr, q.dp.Load()
	next := q.attr
	qpstate.Apply(&next, attr, mask)
	if q.dev != nil {
		if err := q.dev.modify(to, &next); err != nil {
			return cur, err
		}
	}
	q.attr = next
	q.dp.Store(&dataAttrs{
		dgid: next.AV.DGID, sgidIndex: next.AV.SGIDIndex, dqpn: next.DestQPN, qkey: next.QKey,
		access: next.AccessFlags, mtu: pathMTU(next.PathMTU, q.adapter.PortMTU()), timeout: next.Timeout,
		retryCnt: next.RetryCnt, rnrRetry: next.RNRRetry, minRNRTimer: next.MinRNRTimer,
	})
	switch to {
	case abi.QPStateReset:
		defer func() {
			if receiving(cur) {
				q.revokePeers() // once RESET is published
			}
		}()
		q.procMu.Lock()
		q.dropWire()
		q.sqCons = shm.Load32(q.mem, abi.RingProdOff)
		if q.dev != nil {
			q.dev.slots.reset(q.sqCons)
		}
		q.publishSQCons()
		q.publishSQDone()
		q.stallUntil.Store(0)
		q.stallLeft = -1
		q.procMu.Unlock()
		if !q.srq {
			q.rq.discard()
			if q.dev == nil {
				shm.Store32(q.mem, q.rqRing.Offset+abi.RingNotifyOff, 0)
			}
		}
		q.state.Store(uint32(to))
		q.publishState()
	case abi.QPStateErr:
		q.enterError()
	default:
		// The engine may have moved the QP to ERR since cur was read (a
		// responder error, a dead peer); only RESET leaves ERR.
		if !q.state.CompareAndSwap(uint32(cur), uint32(to)) {
			q.attr = prevAttr
			q.dp.Store(prevDP)
			return q.State(), &qpstate.Error{Type: q.typ, From: q.State(), To: to, Reason: "the QP went to ERR meanwhile; only RESET leaves ERR"}
		}
		q.publishState()
		if q.dev == nil {
			q.setupWire(to, &next)
		}
		q.kickWorker()
		if receiving(cur) && (next.AccessFlags != prevAttr.AccessFlags || next.DestQPN != prevAttr.DestQPN || next.AV.DGID != prevAttr.AV.DGID) {
			// The initiators mapped q's regions under the old grant, or are no
			// longer the QP q answers.
			q.revokePeers()
		}
	}
	return to, nil
}

func pathMTU(m, active abi.MTU) int {
	if !m.Valid() {
		m = active
	}
	return min(m, active).Bytes()
}

// enterError moves the QP to ERR; the worker flushes its queues.
func (q *QP) enterError() bool {
	prev := abi.QPState(q.state.Swap(uint32(abi.QPStateErr)))
	// Other goroutines call this (a peer's worker, a session's cleanup), so
	// the mapping is guarded against release.
	q.memMu.Lock()
	if q.mem != nil {
		shm.Store32(q.mem, abi.QPStateOff, q.state.Load())
		if !q.srq {
			// From now on the client rings the doorbell after posting
			// receives, so that they are flushed.
			shm.Store32(q.mem, q.rqRing.Offset+abi.RingNotifyOff, 1)
		}
	}
	q.memMu.Unlock()
	q.kickWorker()
	if receiving(prev) {
		q.revokePeers()
	}
	return prev != abi.QPStateErr
}

// Fail moves the QP to ERR and tells its owner with an event of type t.
func (q *QP) Fail(t abi.EventType, reason string) {
	if q.enterError() && q.Events != nil {
		q.Events.Event(t, q.Handle, q.qpn, reason)
	}
}

func (q *QP) kickWorker() {
	q.kick.Store(true)
	q.doorbell.Signal()
}

// publishState copies the QP's state into its shared region, where the
// library reads it (State, and before every direct-path operation). Every
// change of q.state is followed by a call; each publishes the state current
// under memMu, so the last one leaves the latest.
func (q *QP) publishState() {
	q.memMu.Lock()
	if q.mem != nil {
		shm.Store32(q.mem, abi.QPStateOff, q.state.Load())
	}
	q.memMu.Unlock()
}

// sqFreed is how far the send queue's slots are free: on the rdma path a
// slot stays taken until its request completes, as a send queue's depth
// counts outstanding requests (IBTA 10.8.3).
func (q *QP) sqFreed() uint32 {
	done := q.sqCons
	if rm := q.rm; rm != nil && rm.wired {
		done -= uint32(rm.tp.Outstanding())
	}
	return done
}

// publishSQCons tells the client how far the send queue has been consumed:
// the slots it may reuse. It comes before the completion is pushed, so a
// client that posts again on seeing a completion finds its slot free.
func (q *QP) publishSQCons() {
	q.sqConsPub.Store(q.sqCons)
	if q.dev != nil {
		q.dev.engineDone() // the device's QP frees slots as it completes (device_slots.go)
		return
	}
	shm.Store32(q.mem, abi.RingConsOff, q.sqFreed())
}

// publishSQDone tells the client that every request before the consumer
// index has its completion, if it asked for one, in the CQ. It comes after
// the push: the direct path runs a request only when nothing is left
// before it, and its completion must follow theirs (abi.SQDoneOff).
func (q *QP) publishSQDone() {
	if q.dev != nil {
		q.dev.sqDone()
		return
	}
	shm.Store32(q.mem, abi.SQDoneOff, q.sqFreed())
}

// Destroy stops the QP's worker and frees it.
func (q *QP) Destroy() {
	q.SendPending()
	q.procMu.Lock()
	q.dead = true
	q.procMu.Unlock()
	q.cancel()
	if q.ownBell {
		// Closing wakes the worker for certain, whatever the client does with
		// its end.
		q.doorbell.Close()
	}
	<-q.done
	q.detachAllMcast()
	q.adapter.removeQP(q)
	q.dev.destroy()
	if receiving(q.State()) {
		q.revokePeers() // no lookup finds q any more
	}
	q.release()
	if q.sendCQ != nil {
		q.sendCQ.Unuse()
		q.recvCQ.Unuse()
	}
	if q.xrcd != nil {
		q.xrcd.unuse()
	}
}

// SendPending runs the datagrams a UD QP in RTS has posted and its worker
// has not run yet. rdma_rxe sends a datagram in the post's own call, and
// programs count on it: mckey's sender posts unsignaled sends, then
// destroys its address handle and its QP at once. The daemon calls it
// before either goes.
func (q *QP) SendPending() {
	if q.typ == abi.QPTypeUD && q.State() == abi.QPStateRTS {
		q.step()
	}
}

func (q *QP) release() {
	q.procMu.Lock()
	defer q.procMu.Unlock()
	q.dead = true
	if q.srq {
		q.rq.Unuse()
	} else if q.rq != nil {
		q.rq.close()
	}
	if q.ownBell {
		q.doorbell.Close() // again, for a QP that never started its worker; a no-op otherwise
	}
	q.dropWire()
	q.memMu.Lock()
	q.region.Close()
	q.mem = nil
	q.memMu.Unlock()
}
