package abi

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vrdma/vrdma/ibv"
)

// SGE is one scatter/gather element (package ibv's).
type SGE = ibv.SGE

// The byte layout of an SGE in a work request (SGESize bytes).
const (
	SGEAddrOff   = 0 // u64
	SGELengthOff = 8 // u32
	SGELKeyOff   = 12
)

// Send WQE layout (little-endian), SendWQEHeader bytes then the body:
//
//	 0 wr_id u64          8 opcode u8, flags u8, num_sge u8, rsvd u8
//	12 imm u32           16 remote_addr u64      24 rkey u32
//	28 inline_len u32    32 compare_add u64      40 swap u64
//	48 ah u32            52 remote_qpn u32       56 remote_qkey u32
//	60 rsvd u32          64 body: num_sge × SGE, or inline_len bytes
//
// The Send*Off constants are the offsets of its fields.
const (
	SendWRIDOff       = 0
	SendOpcodeOff     = 8
	SendFlagsOff      = 9
	SendNumSGEOff     = 10
	SendImmOff        = 12
	SendRemoteAddrOff = 16
	SendRKeyOff       = 24
	SendInlineLenOff  = 28
	SendCompareAddOff = 32
	SendSwapOff       = 40
	SendAHOff         = 48
	SendRemoteQPNOff  = 52
	SendRemoteQKeyOff = 56
)

// SendWQE is a decoded send work request.
type SendWQE struct {
	WRID       uint64
	Opcode     Opcode
	Flags      SendFlags
	Imm        uint32
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64
	Swap       uint64
	AH         uint32 // UD: address handle
	RemoteQPN  uint32 // UD
	RemoteQKey uint32 // UD
	NumSGE     int
	SGL        [MaxSGE]SGE
	Inline     []byte // aliases the parsed buffer when Flags has SendInline
}

// MaxSGE is the most scatter/gather entries one work request can carry.
const MaxSGE = 32

// Parse errors, each mapped to the completion status the daemon reports.
var (
	ErrBadOpcode  = errors.New("work request opcode is not valid for this QP type")
	ErrTooManySGE = errors.New("work request has more scatter/gather entries than the queue was created with")
	ErrInlineLen  = errors.New("inline data is longer than the queue's max_inline_data")
	ErrShortEntry = errors.New("ring entry is shorter than its header")
)

// ParseSendWQE decodes b (a private copy of one ring entry) into w. maxSGE and
// maxInline are the queue's capabilities.
func ParseSendWQE(b []byte, w *SendWQE, qpType QPType, maxSGE, maxInline int) error {
	if len(b) < SendWQEHeader {
		return ErrShortEntry
	}
	le := binary.LittleEndian
	w.WRID = le.Uint64(b[SendWRIDOff:])
	w.Opcode = Opcode(b[SendOpcodeOff])
	w.Flags = SendFlags(b[SendFlagsOff])
	w.Imm = le.Uint32(b[SendImmOff:])
	w.RemoteAddr = le.Uint64(b[SendRemoteAddrOff:])
	w.RKey = le.Uint32(b[SendRKeyOff:])
	w.CompareAdd = le.Uint64(b[SendCompareAddOff:])
	w.Swap = le.Uint64(b[SendSwapOff:])
	w.AH = le.Uint32(b[SendAHOff:])
	w.RemoteQPN = le.Uint32(b[SendRemoteQPNOff:])
	w.RemoteQKey = le.Uint32(b[SendRemoteQKeyOff:])
	w.NumSGE = 0
	w.Inline = nil
	if !w.Opcode.AllowedOn(qpType) {
		return ErrBadOpcode
	}
	body := b[SendWQEHeader:]
	if w.Flags&SendInline != 0 {
		n := int(le.Uint32(b[SendInlineLenOff:]))
		if n > maxInline || n > len(body) || w.Opcode == OpRDMARead || w.Opcode.IsAtomic() || w.Opcode == OpAtomicWrite {
			return ErrInlineLen
		}
		w.Inline = body[:n]
		return nil
	}
	n := int(b[SendNumSGEOff])
	if n > maxSGE || n > MaxSGE || n*SGESize > len(body) {
		return ErrTooManySGE
	}
	for i := 0; i < n; i++ {
		e := body[i*SGESize:]
		w.SGL[i] = parseSGE(e)
	}
	w.NumSGE = n
	return nil
}

// PutSendWQE encodes w into b, which must hold at least the entry stride.
// Inline data, if any, is taken from inline (w.Inline is ignored).
func PutSendWQE(b []byte, w *SendWQE, sgl []SGE, inline []byte) error {
	if len(b) < SendWQEHeader {
		return ErrShortEntry
	}
	le := binary.LittleEndian
	le.PutUint64(b[SendWRIDOff:], w.WRID)
	b[SendOpcodeOff] = byte(w.Opcode)
	b[SendFlagsOff] = byte(w.Flags)
	b[SendNumSGEOff] = 0
	b[11] = 0
	le.PutUint32(b[SendImmOff:], w.Imm)
	le.PutUint64(b[SendRemoteAddrOff:], w.RemoteAddr)
	le.PutUint32(b[SendRKeyOff:], w.RKey)
	le.PutUint32(b[SendInlineLenOff:], 0)
	le.PutUint64(b[SendCompareAddOff:], w.CompareAdd)
	le.PutUint64(b[SendSwapOff:], w.Swap)
	le.PutUint32(b[SendAHOff:], w.AH)
	le.PutUint32(b[SendRemoteQPNOff:], w.RemoteQPN)
	le.PutUint32(b[SendRemoteQKeyOff:], w.RemoteQKey)
	le.PutUint32(b[60:], 0)
	body := b[SendWQEHeader:]
	if w.Flags&SendInline != 0 {
		if len(inline) > len(body) {
			return ErrInlineLen
		}
		le.PutUint32(b[SendInlineLenOff:], uint32(len(inline)))
		copy(body, inline)
		return nil
	}
	if len(sgl) > MaxSGE || len(sgl)*SGESize > len(body) {
		return ErrTooManySGE
	}
	b[SendNumSGEOff] = byte(len(sgl))
	for i, s := range sgl {
		e := body[i*SGESize:]
		putSGE(e, s)
	}
	return nil
}

// parseSGE decodes the SGE at the start of e.
func parseSGE(e []byte) SGE {
	le := binary.LittleEndian
	return SGE{Addr: le.Uint64(e[SGEAddrOff:]), Length: le.Uint32(e[SGELengthOff:]), LKey: le.Uint32(e[SGELKeyOff:])}
}

// putSGE encodes s at the start of e.
func putSGE(e []byte, s SGE) {
	le := binary.LittleEndian
	le.PutUint64(e[SGEAddrOff:], s.Addr)
	le.PutUint32(e[SGELengthOff:], s.Length)
	le.PutUint32(e[SGELKeyOff:], s.LKey)
}

// Receive WQE layout: 0 wr_id u64, 8 num_sge u32, 12 rsvd u32, 16 SGEs.
const (
	RecvWRIDOff   = 0
	RecvNumSGEOff = 8
)

// RecvWQE is a decoded receive work request.
type RecvWQE struct {
	WRID   uint64
	NumSGE int
	SGL    [MaxSGE]SGE
}

// ParseRecvWQE decodes b (a private copy of one ring entry) into w.
func ParseRecvWQE(b []byte, w *RecvWQE, maxSGE int) error {
	if len(b) < RecvWQEHeader {
		return ErrShortEntry
	}
	le := binary.LittleEndian
	w.WRID = le.Uint64(b[RecvWRIDOff:])
	n := le.Uint32(b[RecvNumSGEOff:])
	if int64(n) > int64(maxSGE) || n > MaxSGE || int(n)*SGESize > len(b)-RecvWQEHeader {
		w.NumSGE = 0
		return ErrTooManySGE
	}
	for i := 0; i < int(n); i++ {
		e := b[RecvWQEHeader+i*SGESize:]
		w.SGL[i] = parseSGE(e)
	}
	w.NumSGE = int(n)
	return nil
}

// PutRecvWQE encodes a receive request into b.
func PutRecvWQE(b []byte, wrID uint64, sgl []SGE) error {
	if len(b) < RecvWQEHeader || len(sgl) > MaxSGE || RecvWQEHeader+len(sgl)*SGESize > len(b) {
		return ErrTooManySGE
	}
	le := binary.LittleEndian
	le.PutUint64(b[RecvWRIDOff:], wrID)
	le.PutUint32(b[RecvNumSGEOff:], uint32(len(sgl)))
	le.PutUint32(b[12:], 0)
	for i, s := range sgl {
		e := b[RecvWQEHeader+i*SGESize:]
		putSGE(e, s)
	}
	return nil
}

// CQE is one work completion as it sits in a completion ring:
//
//	 0 wr_id u64     8 qp_num u32    12 byte_len u32
//	16 imm u32      20 src_qp u32    24 opcode u8, status u8, wc_flags u8, sl u8
//	28 pkey_index u16, rsvd u16
type CQE struct {
	WRID    uint64
	QPNum   uint32
	ByteLen uint32
	Imm     uint32
	SrcQP   uint32
	Opcode  WCOpcode
	Status  Status
	Flags   WCFlags
	// SL is ibv_wc.sl. For a UD receive it says what the GRH area holds,
	// as mlx5 devices report it on RoCE (WCSLRoCEv2IPv4, WCSLRoCEv2IPv6);
	// zero otherwise.
	SL        uint8
	PKeyIndex uint16
}

// The byte offsets of a CQE's fields.
const (
	CQEWRIDOff      = 0
	CQEQPNumOff     = 8
	CQEByteLenOff   = 12
	CQEImmOff       = 16
	CQESrcQPOff     = 20
	CQEOpcodeOff    = 24
	CQEStatusOff    = 25
	CQEFlagsOff     = 26
	CQESLOff        = 27
	CQEPKeyIndexOff = 28
)

// A timestamped CQ (ibv_create_cq_ex with a completion timestamp flag;
// docs/design/cq-timestamps.md) has entries of CQETSSize bytes: the
// CQESize-byte CQE, then when the daemon wrote it, on two clocks, as
// nanoseconds (u64): CLOCK_MONOTONIC, the device's free-running clock of
// 1 GHz, and CLOCK_REALTIME, the wall clock. The rest is zero.
const (
	CQETimestampOff = 32 // CLOCK_MONOTONIC, ns
	CQEWallclockOff = 40 // CLOCK_REALTIME, ns since the epoch
)

// PutCQETimestamps writes the two clocks into b, the CQETSSize-byte entry
// PutCQE filled.
func PutCQETimestamps(b []byte, mono, wall uint64) {
	_ = b[CQETSSize-1]
	le := binary.LittleEndian
	le.PutUint64(b[CQETimestampOff:], mono)
	le.PutUint64(b[CQEWallclockOff:], wall)
}

// PutCQE encodes c into b (CQESize bytes).
func PutCQE(b []byte, c *CQE) {
	_ = b[CQESize-1]
	le := binary.LittleEndian
	le.PutUint64(b[CQEWRIDOff:], c.WRID)
	le.PutUint32(b[CQEQPNumOff:], c.QPNum)
	le.PutUint32(b[CQEByteLenOff:], c.ByteLen)
	le.PutUint32(b[CQEImmOff:], c.Imm)
	le.PutUint32(b[CQESrcQPOff:], c.SrcQP)
	b[CQEOpcodeOff] = byte(c.Opcode)
	b[CQEStatusOff] = byte(c.Status)
	b[CQEFlagsOff] = byte(c.Flags)
	b[CQESLOff] = c.SL
	le.PutUint16(b[CQEPKeyIndexOff:], c.PKeyIndex)
	le.PutUint16(b[30:], 0)
}

// ParseCQE decodes a completion written by the daemon.
func ParseCQE(b []byte, c *CQE) {
	_ = b[CQESize-1]
	le := binary.LittleEndian
	c.WRID = le.Uint64(b[CQEWRIDOff:])
	c.QPNum = le.Uint32(b[CQEQPNumOff:])
	c.ByteLen = le.Uint32(b[CQEByteLenOff:])
	c.Imm = le.Uint32(b[CQEImmOff:])
	c.SrcQP = le.Uint32(b[CQESrcQPOff:])
	c.Opcode = WCOpcode(b[CQEOpcodeOff])
	c.Status = Status(b[CQEStatusOff])
	c.Flags = WCFlags(b[CQEFlagsOff])
	c.SL = b[CQESLOff]
	c.PKeyIndex = le.Uint16(b[CQEPKeyIndexOff:])
}

// The sl of a UD receive's completion, as mlx5 devices report it on RoCE:
// bit 3 a RoCEv2 packet (with a UDP header), bits 2:0 the network header in
// the GRH area: 1 an IPv6 header (all 40 bytes), 2 an IPv4 header (the last
// 20). UCX's ud_verbs (1.13) reads these bits to find the destination GID
// in the GRH area and drops a packet whose GID is not the receiver's.
const (
	WCSLRoCEv2IPv6 uint8 = 0x9
	WCSLRoCEv2IPv4 uint8 = 0xA
)

// GRHSize is the space a UD receive buffer reserves for the Global Route Header.
const GRHSize = 40

// PutGRH writes an IBTA Global Route Header (IPv6 layout) into b[:40].
func PutGRH(b []byte, payloadLen int, sgid, dgid [16]byte, hopLimit uint8) {
	_ = b[GRHSize-1]
	b[0], b[1], b[2], b[3] = 0x60, 0, 0, 0
	binary.BigEndian.PutUint16(b[4:], uint16(payloadLen))
	b[6] = 0x1b // next header: IBA transport
	b[7] = hopLimit
	copy(b[8:24], sgid[:])
	copy(b[24:40], dgid[:])
}

func (c CQE) String() string {
	return fmt.Sprintf("wr_id=%d qp=%d op=%v status=%v len=%d", c.WRID, c.QPNum, c.Opcode, c.Status, c.ByteLen)
}
