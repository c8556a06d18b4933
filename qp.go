package vrdma

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
)

// QPCap are a queue pair's capabilities (struct ibv_qp_cap).
type QPCap struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// QPInitAttr describes a queue pair to create (struct ibv_qp_init_attr).
type QPInitAttr struct {
	Type   ibv.QPType
	SendCQ *CQ
	RecvCQ *CQ
	SRQ    *SRQ // optional: receive from a shared receive queue
	Cap    QPCap
	SigAll bool // every send request completes, signaled or not
}

// SendWR is a send work request (struct ibv_send_wr).
type SendWR struct {
	ID     uint64
	Opcode ibv.Opcode
	Flags  ibv.SendFlags
	SGL    []ibv.SGE
	// Inline, if set, is sent as inline data (the SendInline flag is
	// implied); otherwise SendInline copies the SGL's bytes at post time.
	Inline []byte
	Imm    uint32 // SEND_WITH_IMM, RDMA_WRITE_WITH_IMM

	RemoteAddr uint64 // RDMA and atomics
	RKey       uint32
	CompareAdd uint64 // atomics: compare (CAS) or add (FAA)
	Swap       uint64 // CAS

	AH         *AH    // UD
	RemoteQPN  uint32 // UD
	RemoteQKey uint32 // UD; the high bit set means "use the QP's Q_Key"
}

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	ID  uint64
	SGL []ibv.SGE
}

// PostError says which work request of a post was refused; the ones
// before it were posted.
type PostError struct {
	Index int
	Err   error
}

func (e *PostError) Error() string { return fmt.Sprintf("vrdma: work request %d: %v", e.Index, e.Err) }
func (e *PostError) Unwrap() error { return e.Err }

// QP is a queue pair.
type QP struct {
	d      *Device
	pd     *PD
	handle uint32
	qpn    uint32
	typ    ibv.QPType
	caps   QPCap
	srq    *SRQ
	sendCQ *CQ
	recvCQ *CQ
	psn    uint32

	region *shm.Region
	mem    []byte
	sq, rq abi.RingLayout
	bell   *shm.Doorbell

	path   atomic.Pointer[[2]string]
	direct atomic.Bool // one-sided operations may run here (direct.go)
	sigAll bool

	// smu guards the send side and the shared region's lifetime: mem is nil
	// once the QP is destroyed, and final is then its last state.
	smu      sync.Mutex
	sqProd   uint32
	final    ibv.QPState
	rmrs     map[uint32]*remoteMR // peer regions mapped for the direct path
	revoke   uint32               // the daemon's revoke generation the mappings are of
	mapRetry time.Time            // no mapping requests before this
	spans    [abi.MaxSGE][]byte
	rmu      sync.Mutex
	rqProd   uint32
}

// CreateQP creates a queue pair in the RESET state (ibv_create_qp).
func (pd *PD) CreateQP(a QPInitAttr) (*QP, error) {
	if a.SendCQ == nil || a.RecvCQ == nil {
		return nil, errorf("create_qp", ErrInvalidArgument, "a QP needs a send CQ and a receive CQ")
	}
	req := proto.CreateQPReq{PD: pd.handle, Type: uint8(a.Type), SendCQ: a.SendCQ.handle, RecvCQ: a.RecvCQ.handle, SigAll: a.SigAll,
		Caps: proto.QPCaps{MaxSendWR: a.Cap.MaxSendWR, MaxRecvWR: a.Cap.MaxRecvWR, MaxSendSGE: a.Cap.MaxSendSGE, MaxRecvSGE: a.Cap.MaxRecvSGE, MaxInlineData: a.Cap.MaxInlineData}}
	if a.SRQ != nil {
		req.SRQ = a.SRQ.handle
	}
	var r proto.CreateQPResp
	fds, err := pd.d.c.call(proto.OpCreateQP, req, &r)
	if err != nil {
		return nil, err
	}
	if len(fds) != 2 {
		proto.CloseFDs(fds)
		return nil, errorf("create_qp", ErrVersion, "the daemon passed %d descriptors, 2 expected", len(fds))
	}
	sq := abi.RingLayout{Offset: r.SQ.Offset, Entries: r.SQ.Entries, Stride: r.SQ.Stride}
	rq := abi.RingLayout{Offset: r.RQ.Offset, Entries: r.RQ.Entries, Stride: r.RQ.Stride}
	if err := sq.Validate(r.Size); err != nil || (a.SRQ == nil && rq.Validate(r.Size) != nil) {
		proto.CloseFDs(fds)
		return nil, errorf("create_qp", ErrVersion, "the daemon described rings that do not fit its region")
	}
	region, err := mapShared(fds[0], r.Size)
	if err != nil {
		proto.CloseFDs(fds[1:])
		return nil, &Error{Op: "create_qp", Kind: ErrVersion, Err: err}
	}
	bell, err := shm.DoorbellFrom(-1, fds[1])
	if err != nil {
		region.Close()
		return nil, &Error{Op: "create_qp", Kind: ErrVersion, Err: err}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	q := &QP{
		d: pd.d, pd: pd, handle: r.Handle, qpn: r.QPN, typ: a.Type, srq: a.SRQ, sendCQ: a.SendCQ, recvCQ: a.RecvCQ,
		caps:   QPCap{MaxSendWR: r.Caps.MaxSendWR, MaxRecvWR: r.Caps.MaxRecvWR, MaxSendSGE: r.Caps.MaxSendSGE, MaxRecvSGE: r.Caps.MaxRecvSGE, MaxInlineData: r.Caps.MaxInlineData},
		region: region, mem: region.Bytes(), sq: sq, rq: rq, bell: bell, sigAll: a.SigAll,
		psn: binary.LittleEndian.Uint32(b[:]) & 0xFFFFFF,
	}
	pd.d.mu.Lock()
	pd.d.qps[r.Handle] = q
	pd.d.mu.Unlock()
	return q, nil
}

// QPN returns the queue pair number.
func (q *QP) QPN() uint32 { return q.qpn }

// Type returns the transport type.
func (q *QP) Type() ibv.QPType { return q.typ }

// Cap returns the capabilities granted, which may exceed those asked for.
func (q *QP) Cap() QPCap { return q.caps }

// State returns the QP's state. The daemon publishes it in the QP's shared
// memory on every change, so it is current without a call: ERR as soon as
// the daemon moved the QP there (an error completion's QP is in ERR before
// the completion can be polled), and ERR once the device is lost.
func (q *QP) State() ibv.QPState {
	if q.d.lost.Load() {
		return ibv.QPSErr
	}
	q.smu.Lock()
	defer q.smu.Unlock()
	return q.stateLocked()
}

// stateLocked is State with q.smu held and the device not lost.
func (q *QP) stateLocked() ibv.QPState {
	if q.mem == nil {
		return q.final
	}
	return ibv.QPState(shm.Load32(q.mem, abi.QPStateOff))
}

// Path returns how the QP reaches its destination ("memcpy") and why
// ("same host"), once it is in RTR or later.
func (q *QP) Path() (path, reason string) {
	if p := q.path.Load(); p != nil {
		return p[0], p[1]
	}
	return "", ""
}

// Modify changes the QP's attributes and state (ibv_modify_qp). The
// transition and every attribute are checked against the IBTA state
// machine; errors match ErrInvalidState or ErrInvalidAttr. The new state
// is the daemon's to publish (State): a move to ERR that happens while the
// reply is on its way is not undone by it.
func (q *QP) Modify(attr *ibv.QPAttr, mask ibv.QPAttrMask) error {
	var r proto.ModifyQPResp
	if _, err := q.d.c.call(proto.OpModifyQP, proto.ModifyQPReq{Handle: q.handle, Mask: uint32(mask), Attr: *attr}, &r); err != nil {
		return err
	}
	if testHookModified != nil {
		testHookModified(q, ibv.QPState(r.State))
	}
	q.direct.Store(r.Direct)
	if r.Path != "" {
		q.path.Store(&[2]string{r.Path, r.Reason})
	}
	if ibv.QPState(r.State) == ibv.QPSReset {
		q.smu.Lock()
		if q.mem != nil {
			q.sqProd = shm.Load32(q.mem, abi.RingConsOff)
			shm.Store32(q.mem, abi.RingProdOff, q.sqProd)
		}
		q.unmapRemotes() // the next connection may be to another peer
		q.smu.Unlock()
		if q.srq == nil {
			q.rmu.Lock()
			q.rqProd = shm.Load32(q.mem, q.rq.Offset+abi.RingConsOff)
			shm.Store32(q.mem, q.rq.Offset+abi.RingProdOff, q.rqProd)
			q.rmu.Unlock()
		}
	}
	return nil
}

// testHookModified, if set (by tests), runs when a Modify has the daemon's
// reply, with the state the daemon set.
var testHookModified func(q *QP, st ibv.QPState)

// Query returns the QP's attributes as the daemon holds them (ibv_query_qp).
func (q *QP) Query() (ibv.QPAttr, QPCap, error) {
	var r proto.QueryQPResp
	if _, err := q.d.c.call(proto.OpQueryQP, proto.HandleReq{Handle: q.handle}, &r); err != nil {
		return ibv.QPAttr{}, QPCap{}, err
	}
	return r.Attr, q.caps, nil
}

var (
	errPostState = errorf("post_send", ErrInvalidState, "the QP must be in RTS (or ERR, to flush) before posting sends")
	errSQFull    = errorf("post_send", ErrQueueFull, "the send queue is full: poll completions first, or create the QP with a larger MaxSendWR")
	errRQFull    = errorf("post_recv", ErrQueueFull, "the receive queue is full: poll completions first, or create the QP with a larger MaxRecvWR")
	errOpcode    = errorf("post_send", ErrInvalidArgument, "opcode not allowed on this QP type (UC: no READ or atomics; UD: SEND only)")
	errSGE       = errorf("post_send", ErrInvalidArgument, "more scatter/gather entries than the QP's MaxSendSGE")
	errRecvSGE   = errorf("post_recv", ErrInvalidArgument, "more scatter/gather entries than the queue's MaxRecvSGE")
	errInline    = errorf("post_send", ErrInvalidArgument, "inline data longer than the QP's MaxInlineData")
	errAtomicSGE = errorf("post_send", ErrInvalidArgument, "atomics take exactly one 8-byte SGE for the original value")
	errNoAH      = errorf("post_send", ErrInvalidArgument, "UD sends need an address handle (SendWR.AH)")
	errUsesSRQ   = errorf("post_recv", ErrInvalidArgument, "the QP receives from a shared receive queue: post to the SRQ")
	errInlineSGL = errorf("post_send", ErrInvalidArgument, "inline SGEs must lie inside regions registered on this device")
)

// PostSend posts send work requests (ibv_post_send): one doorbell for the
// whole list. It does not allocate; on a refused request it returns a
// *PostError naming it, the ones before it having been posted.
func (q *QP) PostSend(wrs []SendWR) error {
	if q.d.lost.Load() {
		return errPostSendLost
	}
	q.smu.Lock()
	if q.mem == nil {
		q.smu.Unlock()
		return &PostError{Err: errorf("post_send", ErrClosed, "QP destroyed")}
	}
	switch q.stateLocked() {
	case ibv.QPSReset, ibv.QPSInit, ibv.QPSRTR:
		q.smu.Unlock()
		return errPostState
	}
	before := q.sqProd
	posted, err := q.postSend(wrs)
	if q.sqProd != before { // some requests are for the daemon, not all ran directly
		shm.Store32(q.mem, abi.RingProdOff, q.sqProd)
		if shm.Load32(q.mem, abi.RingNotifyOff) != 0 {
			q.bell.Signal()
		}
	}
	q.smu.Unlock()
	if err != nil {
		return &PostError{Index: posted, Err: err}
	}
	return nil
}

func (q *QP) postSend(wrs []SendWR) (int, error) {
	cons := shm.Load32(q.mem, abi.RingConsOff)
	var w abi.SendWQE
	var ib [MaxInlineGather]byte
	for i := range wrs {
		wr := &wrs[i]
		if q.sqProd-cons >= uint32(q.sq.Entries) {
			cons = shm.Load32(q.mem, abi.RingConsOff)
			if q.sqProd-cons >= uint32(q.sq.Entries) {
				return i, errSQFull
			}
		}
		if !wr.Opcode.AllowedOn(q.typ) {
			return i, errOpcode
		}
		if wr.Opcode.IsAtomic() && (len(wr.SGL) != 1 || wr.SGL[0].Length != 8) {
			return i, errAtomicSGE
		}
		// The direct path runs a request only when every one before it has
		// its completion in the CQ (the done index, read before the state:
		// a request that failed has moved the QP to ERR by then), so that
		// its own completion comes after theirs and never overtakes one.
		if q.direct.Load() && q.sqProd == shm.Load32(q.mem, abi.SQDoneOff) && q.stateLocked() == ibv.QPSRTS && q.tryDirect(wr) {
			continue
		}
		w = abi.SendWQE{WRID: wr.ID, Opcode: wr.Opcode, Flags: wr.Flags, Imm: wr.Imm, RemoteAddr: wr.RemoteAddr, RKey: wr.RKey,
			CompareAdd: wr.CompareAdd, Swap: wr.Swap, RemoteQPN: wr.RemoteQPN, RemoteQKey: wr.RemoteQKey}
		if q.typ == ibv.UD {
			if wr.AH == nil {
				return i, errNoAH
			}
			w.AH = wr.AH.handle
		}
		inline := wr.Inline
		if inline != nil {
			w.Flags |= ibv.SendInline
		} else if w.Flags&ibv.SendInline != 0 {
			n := 0
			for _, s := range wr.SGL {
				src, err := q.d.inlineSource(s)
				if err != nil {
					return i, errInlineSGL
				}
				if n+len(src) > len(ib) {
					return i, errInline
				}
				n += copy(ib[n:], src)
			}
			inline = ib[:n]
		}
		if w.Flags&ibv.SendInline != 0 {
			if len(inline) > q.caps.MaxInlineData {
				return i, errInline
			}
		} else if len(wr.SGL) > q.caps.MaxSendSGE {
			return i, errSGE
		}
		slot := q.mem[q.sq.Entry(q.sqProd) : q.sq.Entry(q.sqProd)+q.sq.Stride]
		if err := abi.PutSendWQE(slot, &w, wr.SGL, inline); err != nil {
			return i, errInline
		}
		q.sqProd++
	}
	return len(wrs), nil
}

// MaxInlineGather bounds inline data gathered from SGEs: the most any QP
// takes inline.
const MaxInlineGather = abi.MaxInline

// PostRecv posts receive work requests (ibv_post_recv). It does not allocate.
func (q *QP) PostRecv(wrs []RecvWR) error {
	if q.d.lost.Load() {
		return errPostRecvLost
	}
	if q.srq != nil {
		return &PostError{Err: errUsesSRQ}
	}
	q.rmu.Lock()
	if q.mem == nil {
		q.rmu.Unlock()
		return &PostError{Err: errorf("post_recv", ErrClosed, "QP destroyed")}
	}
	n, err := postRecv(q.mem, q.rq, &q.rqProd, q.caps.MaxRecvSGE, wrs)
	if n > 0 && shm.Load32(q.mem, q.rq.Offset+abi.RingNotifyOff) != 0 {
		q.bell.Signal() // the QP is in ERR: the daemon flushes what we post
	}
	q.rmu.Unlock()
	if err != nil {
		return &PostError{Index: n, Err: err}
	}
	return nil
}

func postRecv(mem []byte, ring abi.RingLayout, prod *uint32, maxSGE int, wrs []RecvWR) (int, error) {
	cons := shm.Load32(mem, ring.Offset+abi.RingConsOff)
	n := 0
	var err error
	for i := range wrs {
		if *prod-cons >= uint32(ring.Entries) {
			if cons = shm.Load32(mem, ring.Offset+abi.RingConsOff); *prod-cons >= uint32(ring.Entries) {
				err = errRQFull
				break
			}
		}
		if len(wrs[i].SGL) > maxSGE {
			err = errRecvSGE
			break
		}
		off := ring.Entry(*prod)
		if abi.PutRecvWQE(mem[off:off+ring.Stride], wrs[i].ID, wrs[i].SGL) != nil {
			err = errRecvSGE
			break
		}
		*prod++
		n++
	}
	if n > 0 {
		shm.Store32(mem, ring.Offset+abi.RingProdOff, *prod)
	}
	return n, err
}

// Destroy destroys the QP (ibv_destroy_qp).
func (q *QP) Destroy() error {
	if err := q.d.release(proto.OpDestroyQP, q.handle); err != nil {
		return err
	}
	q.d.mu.Lock()
	delete(q.d.qps, q.handle)
	q.d.mu.Unlock()
	q.smu.Lock()
	q.rmu.Lock()
	q.unmapRemotes()
	q.final = q.stateLocked()
	q.region.Close()
	q.bell.Close()
	q.mem = nil
	q.rmu.Unlock()
	q.smu.Unlock()
	return nil
}

// SRQ is a shared receive queue (ibv_srq).
type SRQ struct {
	pd     *PD
	handle uint32
	maxSGE int
	region *shm.Region
	mem    []byte
	ring   abi.RingLayout

	mu   sync.Mutex
	prod uint32
}

// CreateSRQ creates a shared receive queue (ibv_create_srq).
func (pd *PD) CreateSRQ(maxWR, maxSGE int) (*SRQ, error) {
	var r proto.CreateSRQResp
	fds, err := pd.d.c.call(proto.OpCreateSRQ, proto.CreateSRQReq{PD: pd.handle, MaxWR: maxWR, MaxSGE: maxSGE}, &r)
	if err != nil {
		return nil, err
	}
	if len(fds) != 1 {
		proto.CloseFDs(fds)
		return nil, errorf("create_srq", ErrVersion, "the daemon passed %d descriptors, 1 expected", len(fds))
	}
	ring := abi.RingLayout{Offset: r.Ring.Offset, Entries: r.Ring.Entries, Stride: r.Ring.Stride}
	if err := ring.Validate(r.Size); err != nil {
		proto.CloseFDs(fds)
		return nil, errorf("create_srq", ErrVersion, "%v", err)
	}
	region, err := mapShared(fds[0], r.Size)
	if err != nil {
		return nil, &Error{Op: "create_srq", Kind: ErrVersion, Err: err}
	}
	s := &SRQ{pd: pd, handle: r.Handle, maxSGE: r.MaxSGE, region: region, mem: region.Bytes(), ring: ring}
	pd.d.mu.Lock()
	pd.d.srqs[r.Handle] = s
	pd.d.mu.Unlock()
	return s, nil
}

// PostRecv posts receive work requests to the SRQ (ibv_post_srq_recv).
func (s *SRQ) PostRecv(wrs []RecvWR) error {
	if s.pd.d.lost.Load() {
		return errPostRecvLost
	}
	s.mu.Lock()
	if s.mem == nil {
		s.mu.Unlock()
		return &PostError{Err: errorf("post_srq_recv", ErrClosed, "SRQ destroyed")}
	}
	n, err := postRecv(s.mem, s.ring, &s.prod, s.maxSGE, wrs)
	s.mu.Unlock()
	if err != nil {
		return &PostError{Index: n, Err: err}
	}
	return nil
}

// Destroy destroys the SRQ; no QP may still use it.
func (s *SRQ) Destroy() error {
	if err := s.pd.d.release(proto.OpDestroySRQ, s.handle); err != nil {
		return err
	}
	s.pd.d.mu.Lock()
	delete(s.pd.d.srqs, s.handle)
	s.pd.d.mu.Unlock()
	s.mu.Lock()
	s.region.Close()
	s.mem = nil
	s.mu.Unlock()
	return nil
}
