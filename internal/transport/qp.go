package transport

import (
	"errors"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

// Config is a QP's transport attributes, from its Modify calls.
type Config struct {
	Type     abi.QPType
	QPN      uint32
	DestQPN  uint32 // RC/UC: the connected QP
	MTU      uint32 // path MTU in bytes: 256..4096 (UD: the port's)
	SendCap  int    // send work requests held at once
	PKey     uint16
	QKey     uint32     // UD: the QP's own Q_Key
	Access   abi.Access // the responder's remote access flags
	SQPSN    uint32     // first PSN the requester sends
	RQPSN    uint32     // first PSN the responder expects
	Timeout  uint8      // local ACK timeout: 4.096 µs × 2^Timeout; 0 = none
	RetryCnt uint8      // 7 = for ever, as rxe
	RNRRetry uint8      // 7 = for ever
	// MinRNRTimer is the responder's RNR NAK timer code.
	MinRNRTimer uint8
	// MaxRdAtomic is how many READs and atomics the requester has
	// outstanding at once; MaxDestRdAtomic how many the responder keeps
	// for duplicates.
	MaxRdAtomic     int
	MaxDestRdAtomic int
	// XRC: the QP is an XRC initiator or target (Type is RC): its packets
	// have XRC opcodes, its requests the XRCETH of the WQE's SRQN, and a
	// target selects the SRQ each request names (XRCEnv) before it takes a
	// receive.
	XRC bool
}

// maxUnackedPSNs is the requester's window, as rxe's RXE_MAX_UNACKED_PSNS.
const maxUnackedPSNs = 128

// ErrFull is returned by Post when the QP holds SendCap requests already.
var ErrFull = errors.New("transport: send queue full")

// QP is the transport state of one queue pair. It is not safe for
// concurrent use: its owner serialises every call.
type QP struct {
	cfg   Config
	req   requester
	rsp   responder
	pkt   wire.Packet // scratch for outgoing packets
	spans [1][]byte   // scratch gather list for responses and ATOMIC WRITE
	word  [8]byte     // an ATOMIC WRITE's payload while it is sent
	err   bool        // stopped: the owner moves the QP to ERR and flushes
	now   int64       // the time of the Receive or Tick in progress
}

// New returns the transport of a QP in RTS (requester) and RTR
// (responder) with cfg.
func New(cfg Config) *QP {
	q := &QP{}
	q.reset(cfg)
	return q
}

func (q *QP) reset(cfg Config) {
	if cfg.SendCap < 1 {
		cfg.SendCap = 1
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1024
	}
	if cfg.MaxRdAtomic < 1 {
		cfg.MaxRdAtomic = 1
	}
	if cfg.MaxDestRdAtomic < 1 {
		cfg.MaxDestRdAtomic = 1
	}
	q.cfg = cfg
	q.req = requester{
		wqes:     make([]WQE, cfg.SendCap),
		psn:      cfg.SQPSN & psnMask,
		ackPSN:   cfg.SQPSN & psnMask,
		retryCnt: int(cfg.RetryCnt),
		rnrLeft:  int(cfg.RNRRetry),
	}
	q.rsp = responder{
		epsn: cfg.RQPSN & psnMask,
		res:  make([]resource, cfg.MaxDestRdAtomic),
	}
	for i := range q.rsp.res {
		q.rsp.res[i].index = i
	}
}

// Update changes attributes of a live QP (a later Modify: timeout, retry
// counts, RNR timer, access flags). PSNs and the destination stay.
func (q *QP) Update(cfg Config) {
	q.cfg.Timeout = cfg.Timeout
	q.cfg.RetryCnt = cfg.RetryCnt
	q.cfg.RNRRetry = cfg.RNRRetry
	q.cfg.MinRNRTimer = cfg.MinRNRTimer
	q.cfg.Access = cfg.Access
	q.cfg.QKey = cfg.QKey
	if cfg.MaxRdAtomic > 0 {
		q.cfg.MaxRdAtomic = cfg.MaxRdAtomic
	}
}

// Config returns the QP's attributes.
func (q *QP) Config() Config { return q.cfg }

// Failed reports whether the QP stopped on an error.
func (q *QP) Failed() bool { return q.err }

// Room returns how many more work requests Post takes now.
func (q *QP) Room() int { return len(q.req.wqes) - int(q.req.tail-q.req.head) }

// Outstanding returns how many posted requests have not completed.
func (q *QP) Outstanding() int { return int(q.req.tail - q.req.head) }

// SendPSN returns the next PSN the requester sends; ExpectedPSN the next
// the responder expects.
func (q *QP) SendPSN() uint32     { return q.req.psn }
func (q *QP) ExpectedPSN() uint32 { return q.rsp.epsn }

// Post queues a send work request and sends what the window allows.
func (q *QP) Post(env Env, w *WQE, now int64) error {
	r := &q.req
	if int(r.tail-r.head) >= len(r.wqes) {
		return ErrFull
	}
	slot := &r.wqes[r.tail%uint64(len(r.wqes))]
	*slot = *w
	slot.started, slot.resp, slot.firstPSN, slot.npkts = false, 0, 0, 0
	r.tail++
	q.pump(env, now)
	return nil
}

// Deadline returns when Tick next has something to do (0: nothing).
func (q *QP) Deadline() int64 {
	if q.err {
		return 0
	}
	r := &q.req
	d := r.timerAt
	if r.rnrUntil != 0 && (d == 0 || r.rnrUntil < d) {
		d = r.rnrUntil
	}
	if a := q.rsp.resumeAt; a != 0 && (d == 0 || a < d) {
		d = a
	}
	return d
}

// Tick runs the timers: the retransmit timer, the RNR wait, and the
// responder's answers waiting for the link.
func (q *QP) Tick(env Env, now int64) {
	if q.err {
		return
	}
	q.now = now
	if a := q.rsp.resumeAt; a != 0 && now >= a {
		q.sendAnswers(env, now)
	}
	r := &q.req
	if r.rnrUntil != 0 && now >= r.rnrUntil {
		r.rnrUntil = 0
		q.pump(env, now)
	}
	if r.timerAt != 0 && now >= r.timerAt {
		r.timerAt = 0
		if r.ackPSN == r.psn && r.next == r.head {
			return // nothing outstanding
		}
		q.retry(env, now, r.ackPSN, RetryTimeout)
	}
}

// Flush completes every request still held with WR_FLUSH_ERR, and a
// receive taken for a message in progress, after the QP went to ERR.
// It reports whether it completed anything.
func (q *QP) Flush(env Env) bool {
	q.err = true
	r := &q.req
	did := r.head != r.tail || q.rsp.haveRecv
	for r.head != r.tail {
		w := &r.wqes[r.head%uint64(len(r.wqes))]
		r.head++
		env.Complete(w, abi.StatusWRFlushErr)
	}
	r.next = r.head
	r.timerAt, r.rnrUntil = 0, 0
	if q.rsp.haveRecv {
		q.rsp.haveRecv = false
		env.CompleteRecv(&q.rsp.recv, &RecvCompletion{Status: abi.StatusWRFlushErr, Opcode: abi.WCRecv})
	}
	return did
}

// fail stops the QP with an error.
func (q *QP) fail(env Env, ev abi.EventType, reason string) {
	if q.err {
		return
	}
	q.err = true
	env.Fail(ev, reason)
}

// Receive handles a packet addressed to the QP: requests go to the
// responder, responses to the completer. The owner has checked the
// network addresses, the P_Key, the ICRC and that the QP's type and state
// accept the packet.
func (q *QP) Receive(env Env, p *wire.Packet, now int64) {
	if q.err {
		env.Drop(DropState)
		return
	}
	q.now = now
	if a := q.rsp.resumeAt; a != 0 && now >= a {
		q.sendAnswers(env, now)
	}
	f := p.Opcode.Flags()
	switch {
	case f&wire.IsResponse != 0:
		if q.cfg.Type != abi.QPTypeRC {
			env.Drop(DropResponse)
			return
		}
		q.complete(env, p, now)
	case f&wire.IsRequest != 0:
		switch q.cfg.Type {
		case abi.QPTypeRC:
			q.respondRC(env, p)
		case abi.QPTypeUC:
			q.respondUC(env, p)
		default:
			q.respondUD(env, p)
		}
	default:
		env.Drop(DropInvalid)
	}
}

// Ready updates the attributes at the move to RTS: the requester starts at
// cfg.SQPSN when it has sent nothing yet.
func (q *QP) Ready(cfg Config) {
	q.Update(cfg)
	r := &q.req
	if r.head == r.tail && r.next == r.head {
		r.psn = cfg.SQPSN & psnMask
		r.ackPSN = r.psn
		r.retryCnt = int(cfg.RetryCnt)
		r.rnrLeft = int(cfg.RNRRetry)
	}
}
