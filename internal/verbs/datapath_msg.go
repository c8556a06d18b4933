package verbs

import "fmt"

// The data path's ops (csrc/datapath.c): CQs, RC QPs, posting batches of
// work requests (one message and one doorbell per batch) and polling
// completions.
const (
	OpCreateCQ  Op = 7  // u32 cqe, u32 flags → u32 handle, u32 cqe
	OpDestroyCQ Op = 8  // u32 handle → (empty)
	OpCreateQP  Op = 9  // send CQ, recv CQ, QPCap, u32 type → QP
	OpModifyQP  Op = 10 // QPAttr (64 bytes) → (empty)
	OpDestroyQP Op = 11 // u32 handle → (empty)
	OpPostSend  Op = 12 // u32 QP, u32 count, SendWRs → (empty)
	OpPostRecv  Op = 13 // u32 QP, u32 count, RecvWRs → (empty)
	OpPollCQ    Op = 14 // u32 CQ, u32 most → u32 count, u32 0, WCs
	// OpCompletions is pushed by the helper, unasked (seq 0), when a CQ
	// made with CQPush has completions: u32 CQ, u32 count, u32 0, WCs.
	OpCompletions Op = 15
)

// CQ flags (OpCreateCQ).
const (
	// CQPush has the helper push the CQ's completions (OpCompletions) as
	// the device reports them through its completion channel, instead of
	// waiting for OpPollCQ.
	CQPush = 1
)

// Limits of the helper's data path.
const (
	// MaxBatch is the most work requests one post carries.
	MaxBatch = 64
	// MaxWRSGE is the most SGEs one work request has.
	MaxWRSGE = 16
	// MaxPoll is the most completions one poll returns.
	MaxPoll = 256
	// MaxWRInline is the most inline bytes one work request carries (the
	// device's max_inline_data bounds it further).
	MaxWRInline = 1024
	// MaxPostBody is the most bytes a post's body has: its work requests
	// (SendWRBytes each) after 8 bytes.
	MaxPostBody = MaxMessage - HeaderSize

	createCQSize = 8
	qpSize       = 32
	modifySize   = 64
	sendWRSize   = 56
	recvWRSize   = 16
	sgeSize      = 16
	wcSize       = 48
	pollHdrSize  = 8
)

// QP types (enum ibv_qp_type) the helper makes.
const (
	QPTypeRC = 2
	QPTypeUD = 4
)

// QP states (enum ibv_qp_state).
const (
	QPStateReset = 0
	QPStateInit  = 1
	QPStateRTR   = 2
	QPStateRTS   = 3
	QPStateErr   = 6
)

// Work request opcodes (enum ibv_wr_opcode).
const (
	WRRDMAWrite        = 0
	WRRDMAWriteWithImm = 1
	WRSend             = 2
	WRSendWithImm      = 3
	WRRDMARead         = 4
	WRAtomicCmpAndSwp  = 5
	WRAtomicFetchAdd   = 6
)

// Send flags (enum ibv_send_flags).
const (
	SendFence     = 1
	SendSignaled  = 2
	SendSolicited = 4
	SendInline    = 8
)

// Completion opcodes (enum ibv_wc_opcode).
const (
	WCSend            = 0
	WCRDMAWrite       = 1
	WCRDMARead        = 2
	WCCompSwap        = 3
	WCFetchAdd        = 4
	WCBindMW          = 5
	WCLocalInv        = 6
	WCTSO             = 7
	WCRecv            = 128
	WCRecvRDMAWithImm = 129
)

// Completion statuses (enum ibv_wc_status), the ones callers test for.
const (
	WCSuccess        = 0
	WCLocLenErr      = 1
	WCLocProtErr     = 4
	WCWRFlushErr     = 5
	WCRemInvReqErr   = 9
	WCRemAccessErr   = 10
	WCRemOpErr       = 11
	WCRetryExcErr    = 12
	WCRNRRetryExcErr = 13
)

// Completion flags (enum ibv_wc_flags).
const (
	// WCFlagGRH marks a UD receive whose buffer starts with the 40-byte GRH.
	WCFlagGRH = 1
	// WCFlagWithImm marks a completion that carries immediate data.
	WCFlagWithImm = 2
)

const (
	wcStatusMax  = 23   // IBV_WC_TM_RNDV_INCOMPLETE
	wcFlagsKnown = 0x7f // IBV_WC_GRH ... IBV_WC_TM_DATA_VALID
	qpnMask      = 0xffffff
)

// CQ is a completion queue of the device, in the helper.
type CQ struct {
	Handle uint32
	CQE    uint32 // entries the device gave it (at least those asked for)
}

// AppendCreateCQ appends an OpCreateCQ request for a CQ of cqe entries
// with flags (CQPush).
func AppendCreateCQ(dst []byte, cqe, flags uint32) []byte {
	dst = AppendHeader(dst, OpCreateCQ, 0, 0, createCQSize)
	return ne.AppendUint32(ne.AppendUint32(dst, cqe), flags)
}

// ParseCQ decodes an OpCreateCQ reply's body for a request of asked entries.
func ParseCQ(b []byte, asked uint32) (CQ, error) {
	if len(b) != 8 {
		return CQ{}, protoErrorf("a CQ of %d bytes, want 8", len(b))
	}
	c := CQ{Handle: ne.Uint32(b), CQE: ne.Uint32(b[4:])}
	if c.CQE < asked {
		return CQ{}, protoErrorf("a CQ of %d entries for %d asked", c.CQE, asked)
	}
	return c, nil
}

// QPCap is a QP's capabilities: asked for at creation, and what it got.
type QPCap struct {
	MaxSendWR, MaxRecvWR   uint32
	MaxSendSGE, MaxRecvSGE uint32
	MaxInline              uint32
}

// QP is a queue pair (RC or UD) of the device, in the helper. QPN is the
// device's: what the peer's QP sends to.
type QP struct {
	Handle uint32
	QPN    uint32
	Cap    QPCap
}

// AppendCreateQP appends an OpCreateQP request for an RC QP on the CQs.
func AppendCreateQP(dst []byte, send, recv CQ, c QPCap) []byte {
	return AppendCreateQPOf(dst, send, recv, c, QPTypeRC)
}

// AppendCreateQPOf appends an OpCreateQP request for a QP of type typ
// (QPTypeRC, QPTypeUD) on the CQs.
func AppendCreateQPOf(dst []byte, send, recv CQ, c QPCap, typ uint32) []byte {
	dst = AppendHeader(dst, OpCreateQP, 0, 0, qpSize)
	for _, v := range []uint32{send.Handle, recv.Handle, c.MaxSendWR, c.MaxRecvWR, c.MaxSendSGE, c.MaxRecvSGE, c.MaxInline, typ} {
		dst = ne.AppendUint32(dst, v)
	}
	return dst
}

// ParseQP decodes an OpCreateQP reply's body for a QP that asked for c:
// it must have at least that (rdma-core's contract).
func ParseQP(b []byte, c QPCap) (QP, error) {
	if len(b) != qpSize {
		return QP{}, protoErrorf("a QP of %d bytes, want %d", len(b), qpSize)
	}
	u := func(off int) uint32 { return ne.Uint32(b[off:]) }
	q := QP{Handle: u(0), QPN: u(4), Cap: QPCap{u(8), u(12), u(16), u(20), u(24)}}
	switch {
	case u(28) != 0:
		return QP{}, protoErrorf("a QP with padding %#x", u(28))
	case q.QPN > qpnMask || q.QPN < 2:
		return QP{}, protoErrorf("QPN %#x is not an RC QP's 24-bit number", q.QPN)
	case q.Cap.MaxSendWR < c.MaxSendWR || q.Cap.MaxRecvWR < c.MaxRecvWR || q.Cap.MaxSendSGE < c.MaxSendSGE ||
		q.Cap.MaxRecvSGE < c.MaxRecvSGE || q.Cap.MaxInline < c.MaxInline:
		return QP{}, protoErrorf("a QP with %+v for %+v asked", q.Cap, c)
	}
	return q, nil
}

// QPAttr is what a QP state transition sets: INIT takes Access; RTR the
// path (the peer's QPN, its receive PSN, the MTU and the address: GID and
// GRH attributes on RoCE, DLID on InfiniBand) and the responder's
// resources; RTS the send PSN, timers and retries. RESET and ERR take only
// the state.
type QPAttr struct {
	State           uint32 // QPStateInit, QPStateRTR, QPStateRTS, QPStateReset, QPStateErr
	Access          uint32 // Access flags the peer may use (INIT)
	PathMTU         uint32 // enum ibv_mtu: 1 is 256 bytes ... 5 is 4096 (RTR)
	DestQPN         uint32 // the peer's QPN (RTR)
	RQPSN, SQPSN    uint32 // the PSN expected from the peer (RTR), the first one sent (RTS)
	FlowLabel       uint32
	DGID            [16]byte // the peer's GID (RTR, IsGlobal)
	DLID            uint16   // the peer's LID (InfiniBand)
	SGIDIndex       uint8    // the local GID entry to send from: a RoCE v2 one for RoCEv2
	HopLimit        uint8
	TrafficClass    uint8
	SL              uint8
	Timeout         uint8 // 4.096 µs × 2^Timeout (RTS)
	RetryCnt        uint8
	RNRRetry        uint8
	MinRNRTimer     uint8
	MaxRdAtomic     uint8 // RDMA READs and atomics in flight from us (RTS)
	MaxDestRdAtomic uint8 // ... to us (RTR)
	IsGlobal        bool  // a GRH: always on RoCE
}

// AppendModifyQP appends an OpModifyQP request moving qp as a says.
func AppendModifyQP(dst []byte, qp QP, a QPAttr) []byte {
	dst = AppendHeader(dst, OpModifyQP, 0, 0, modifySize)
	for _, v := range []uint32{qp.Handle, a.State, a.Access, a.PathMTU, a.DestQPN, a.RQPSN, a.SQPSN, a.FlowLabel} {
		dst = ne.AppendUint32(dst, v)
	}
	dst = append(dst, a.DGID[:]...)
	dst = ne.AppendUint16(dst, a.DLID)
	g := uint8(0)
	if a.IsGlobal {
		g = 1
	}
	return append(dst, a.SGIDIndex, a.HopLimit, a.TrafficClass, a.SL, a.Timeout, a.RetryCnt, a.RNRRetry,
		a.MinRNRTimer, a.MaxRdAtomic, a.MaxDestRdAtomic, g, 0, 0, 0)
}

// SGE is a range of a registered region: the helper turns it into the
// device's address and lkey, and refuses one that leaves the region.
type SGE struct {
	MR     uint32 // the region's handle (MR.Handle)
	Length uint32
	Offset uint64 // from the region's first byte
}

// SendWR is a work request for a QP's send queue.
type SendWR struct {
	WRID       uint64
	Opcode     uint32 // WRRDMAWrite, WRSend, ...
	Flags      uint32 // SendSignaled, ...
	Imm        uint32 // immediate data, as ibv_send_wr holds it (network order)
	SGEs       []SGE
	RemoteAddr uint64 // the peer's address (its MR.Addr plus an offset)
	RKey       uint32
	CompareAdd uint64 // atomics
	Swap       uint64
	// Inline is the data of a request with SendInline (no SGEs): the
	// message carries it and the device copies it at post.
	Inline []byte
}

// SendWRBytes is how many bytes of a post's body a send work request with
// nsge SGEs or ninline inline bytes takes.
func SendWRBytes(nsge, ninline int) int {
	return sendWRSize + nsge*sgeSize + (ninline+7)&^7
}

// RecvWR is a work request for a QP's receive queue.
type RecvWR struct {
	WRID uint64
	SGEs []SGE
}

// AppendPostSend appends an OpPostSend request posting wrs to qp as one
// batch. Too many work requests or SGEs, or a batch over MaxMessage, is an
// error (post fewer at a time).
func AppendPostSend(dst []byte, qp QP, wrs []SendWR) ([]byte, error) {
	n := 8
	for i := range wrs {
		w := &wrs[i]
		switch {
		case len(w.SGEs) > MaxWRSGE:
			return dst, fmt.Errorf("verbs: work request %d has %d SGEs, the helper posts at most %d", i, len(w.SGEs), MaxWRSGE)
		case w.Flags&SendInline == 0 && len(w.Inline) != 0:
			return dst, fmt.Errorf("verbs: work request %d has inline data without SendInline", i)
		case w.Flags&SendInline != 0 && (len(w.SGEs) != 0 || len(w.Inline) > MaxWRInline):
			return dst, fmt.Errorf("verbs: inline work request %d has %d SGEs and %d bytes: want none and at most %d", i, len(w.SGEs), len(w.Inline), MaxWRInline)
		}
		n += SendWRBytes(len(w.SGEs), len(w.Inline))
	}
	if err := checkBatch(len(wrs), n); err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, OpPostSend, 0, 0, n)
	dst = ne.AppendUint32(ne.AppendUint32(dst, qp.Handle), uint32(len(wrs)))
	for i := range wrs {
		w := &wrs[i]
		dst = ne.AppendUint64(dst, w.WRID)
		dst = ne.AppendUint32(dst, w.Opcode)
		dst = ne.AppendUint32(dst, w.Flags)
		dst = ne.AppendUint32(dst, w.Imm)
		dst = ne.AppendUint32(dst, uint32(len(w.SGEs)))
		dst = ne.AppendUint64(dst, w.RemoteAddr)
		dst = ne.AppendUint32(dst, w.RKey)
		dst = ne.AppendUint32(dst, uint32(len(w.Inline)))
		dst = ne.AppendUint64(dst, w.CompareAdd)
		dst = ne.AppendUint64(dst, w.Swap)
		dst = appendSGEs(dst, w.SGEs)
		dst = append(dst, w.Inline...)
		dst = append(dst, make([]byte, -len(w.Inline)&7)...)
	}
	return dst, nil
}

// AppendPostRecv appends an OpPostRecv request posting wrs to qp as one
// batch; its limits are AppendPostSend's.
func AppendPostRecv(dst []byte, qp QP, wrs []RecvWR) ([]byte, error) {
	n := 8
	for i := range wrs {
		if len(wrs[i].SGEs) > MaxWRSGE {
			return dst, fmt.Errorf("verbs: work request %d has %d SGEs, the helper posts at most %d", i, len(wrs[i].SGEs), MaxWRSGE)
		}
		n += recvWRSize + len(wrs[i].SGEs)*sgeSize
	}
	if err := checkBatch(len(wrs), n); err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, OpPostRecv, 0, 0, n)
	dst = ne.AppendUint32(ne.AppendUint32(dst, qp.Handle), uint32(len(wrs)))
	for i := range wrs {
		dst = ne.AppendUint64(dst, wrs[i].WRID)
		dst = ne.AppendUint32(ne.AppendUint32(dst, uint32(len(wrs[i].SGEs))), 0)
		dst = appendSGEs(dst, wrs[i].SGEs)
	}
	return dst, nil
}

func checkBatch(count, body int) error {
	switch {
	case count == 0 || count > MaxBatch:
		return fmt.Errorf("verbs: a batch of %d work requests, 1..%d", count, MaxBatch)
	case HeaderSize+body > MaxMessage:
		return fmt.Errorf("verbs: a batch of %d bytes is over the helper's %d-byte message: post fewer work requests at a time", HeaderSize+body, MaxMessage)
	}
	return nil
}

func appendSGEs(dst []byte, s []SGE) []byte {
	for _, g := range s {
		dst = ne.AppendUint32(dst, g.MR)
		dst = ne.AppendUint32(dst, g.Length)
		dst = ne.AppendUint64(dst, g.Offset)
	}
	return dst
}

// WC is a completion the device reported.
type WC struct {
	WRID      uint64
	Status    uint32 // WCSuccess, or why the work request failed
	Opcode    uint32 // WCSend, WCRDMAWrite, WCRecv, ... (defined only on success)
	VendorErr uint32
	ByteLen   uint32
	Imm       uint32 // as ibv_wc holds it (network order); with WCFlagWithImm
	QPN       uint32 // the local QP's number
	SrcQP     uint32
	Flags     uint32
	// A UD receive's source: its LID (InfiniBand; 0 on RoCE), service
	// level and path bits.
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
}

// AppendPollCQ appends an OpPollCQ request for at most most completions.
func AppendPollCQ(dst []byte, cq CQ, most uint32) []byte {
	dst = AppendHeader(dst, OpPollCQ, 0, 0, 8)
	return ne.AppendUint32(ne.AppendUint32(dst, cq.Handle), most)
}

// ParseWCs decodes an OpPollCQ reply's body into wcs (at most len(wcs),
// which is what was asked) and returns how many it holds.
func ParseWCs(b []byte, wcs []WC) (int, error) {
	if len(b) < pollHdrSize {
		return 0, protoErrorf("a poll reply of %d bytes", len(b))
	}
	n, pad := ne.Uint32(b), ne.Uint32(b[4:])
	switch {
	case pad != 0:
		return 0, protoErrorf("a poll reply with padding %#x", pad)
	case uint64(n) > uint64(len(wcs)):
		return 0, protoErrorf("%d completions for at most %d asked", n, len(wcs))
	case len(b) != pollHdrSize+int(n)*wcSize:
		return 0, protoErrorf("%d completions in %d bytes, want %d", n, len(b), pollHdrSize+int(n)*wcSize)
	}
	for i := 0; i < int(n); i++ {
		e := b[pollHdrSize+i*wcSize:]
		u := func(off int) uint32 { return ne.Uint32(e[off:]) }
		w := WC{WRID: ne.Uint64(e), Status: u(8), Opcode: u(12), VendorErr: u(16), ByteLen: u(20), Imm: u(24), QPN: u(28), SrcQP: u(32), Flags: u(36),
			SLID: uint16(u(40)), SL: uint8(u(40) >> 16), DLIDPathBits: uint8(u(40) >> 24)}
		switch {
		case u(44) != 0:
			return 0, protoErrorf("completion %d: padding %#x", i, u(44))
		case w.SL > 15:
			return 0, protoErrorf("completion %d: service level %d", i, w.SL)
		case w.Status > wcStatusMax:
			return 0, protoErrorf("completion %d: status %d is not 0..%d", i, w.Status, wcStatusMax)
		case w.Status == WCSuccess && w.Opcode > WCTSO && w.Opcode != WCRecv && w.Opcode != WCRecvRDMAWithImm:
			return 0, protoErrorf("completion %d: opcode %d", i, w.Opcode)
		case w.QPN > qpnMask || w.SrcQP > qpnMask:
			return 0, protoErrorf("completion %d: QPN %#x or source QP %#x over 24 bits", i, w.QPN, w.SrcQP)
		case w.Flags&^wcFlagsKnown != 0:
			return 0, protoErrorf("completion %d: flags %#x", i, w.Flags)
		}
		wcs[i] = w
	}
	return int(n), nil
}

// AppendWCs is ParseWCs' inverse: what the helper sends (tests use it).
func AppendWCs(dst []byte, wcs []WC) []byte {
	dst = ne.AppendUint32(ne.AppendUint32(dst, uint32(len(wcs))), 0)
	for _, w := range wcs {
		dst = ne.AppendUint64(dst, w.WRID)
		for _, v := range []uint32{w.Status, w.Opcode, w.VendorErr, w.ByteLen, w.Imm, w.QPN, w.SrcQP, w.Flags,
			uint32(w.SLID) | uint32(w.SL)<<16 | uint32(w.DLIDPathBits)<<24, 0} {
			dst = ne.AppendUint32(dst, v)
		}
	}
	return dst
}
