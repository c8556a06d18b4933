package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// SGE is one scatter/gather element: Length bytes at virtual address Addr
// of the memory region whose local key is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// Send WQE layout (little-endian), SendWQEHeader bytes then the body:
//
//	 0 wr_id u64          8 opcode u8, flags u8, num_sge u8, rsvd u8
//	12 imm u32           16 remote_addr u64      24 rkey u32
//	28 inline_len u32    32 compare_add u64      40 swap u64
//	48 ah u32            52 remote_qpn u32       56 remote_qkey u32
//	60 rsvd u32          64 body: num_sge × SGE, or inline_len bytes
const (
	swWRID       = 0
	swOpcode     = 8
	swFlags      = 9
	swNumSGE     = 10
	swImm        = 12
	swRemoteAddr = 16
	swRKey       = 24
	swInlineLen  = 28
	swCompareAdd = 32
	swSwap       = 40
	swAH         = 48
	swRemoteQPN  = 52
	swRemoteQKey = 56
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
const MaxSGE = 16

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
	w.WRID = le.Uint64(b[swWRID:])
	w.Opcode = Opcode(b[swOpcode])
	w.Flags = SendFlags(b[swFlags])
	w.Imm = le.Uint32(b[swImm:])
	w.RemoteAddr = le.Uint64(b[swRemoteAddr:])
	w.RKey = le.Uint32(b[swRKey:])
	w.CompareAdd = le.Uint64(b[swCompareAdd:])
	w.Swap = le.Uint64(b[swSwap:])
	w.AH = le.Uint32(b[swAH:])
	w.RemoteQPN = le.Uint32(b[swRemoteQPN:])
	w.RemoteQKey = le.Uint32(b[swRemoteQKey:])
	w.NumSGE = 0
	w.Inline = nil
	if !w.Opcode.AllowedOn(qpType) {
		return ErrBadOpcode
	}
	body := b[SendWQEHeader:]
	if w.Flags&SendInline != 0 {
		n := int(le.Uint32(b[swInlineLen:]))
		if n > maxInline || n > len(body) || w.Opcode == OpRDMARead || w.Opcode.IsAtomic() {
			return ErrInlineLen
		}
		w.Inline = body[:n]
		return nil
	}
	n := int(b[swNumSGE])
	if n > maxSGE || n > MaxSGE || n*SGESize > len(body) {
		return ErrTooManySGE
	}
	for i := 0; i < n; i++ {
		e := body[i*SGESize:]
		w.SGL[i] = SGE{Addr: le.Uint64(e), Length: le.Uint32(e[8:]), LKey: le.Uint32(e[12:])}
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
	le.PutUint64(b[swWRID:], w.WRID)
	b[swOpcode] = byte(w.Opcode)
	b[swFlags] = byte(w.Flags)
	b[swNumSGE] = 0
	b[11] = 0
	le.PutUint32(b[swImm:], w.Imm)
	le.PutUint64(b[swRemoteAddr:], w.RemoteAddr)
	le.PutUint32(b[swRKey:], w.RKey)
	le.PutUint32(b[swInlineLen:], 0)
	le.PutUint64(b[swCompareAdd:], w.CompareAdd)
	le.PutUint64(b[swSwap:], w.Swap)
	le.PutUint32(b[swAH:], w.AH)
	le.PutUint32(b[swRemoteQPN:], w.RemoteQPN)
	le.PutUint32(b[swRemoteQKey:], w.RemoteQKey)
	le.PutUint32(b[60:], 0)
	body := b[SendWQEHeader:]
	if w.Flags&SendInline != 0 {
		if len(inline) > len(body) {
			return ErrInlineLen
		}
		le.PutUint32(b[swInlineLen:], uint32(len(inline)))
		copy(body, inline)
		return nil
	}
	if len(sgl) > MaxSGE || len(sgl)*SGESize > len(body) {
		return ErrTooManySGE
	}
	b[swNumSGE] = byte(len(sgl))
	for i, s := range sgl {
		e := body[i*SGESize:]
		le.PutUint64(e, s.Addr)
		le.PutUint32(e[8:], s.Length)
		le.PutUint32(e[12:], s.LKey)
	}
	return nil
}

// Receive WQE layout: 0 wr_id u64, 8 num_sge u32, 12 rsvd u32, 16 SGEs.

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
	w.WRID = le.Uint64(b)
	n := le.Uint32(b[8:])
	if int64(n) > int64(maxSGE) || n > MaxSGE || int(n)*SGESize > len(b)-RecvWQEHeader {
		w.NumSGE = 0
		return ErrTooManySGE
	}
	for i := 0; i < int(n); i++ {
		e := b[RecvWQEHeader+i*SGESize:]
		w.SGL[i] = SGE{Addr: le.Uint64(e), Length: le.Uint32(e[8:]), LKey: le.Uint32(e[12:])}
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
	le.PutUint64(b, wrID)
	le.PutUint32(b[8:], uint32(len(sgl)))
	le.PutUint32(b[12:], 0)
	for i, s := range sgl {
		e := b[RecvWQEHeader+i*SGESize:]
		le.PutUint64(e, s.Addr)
		le.PutUint32(e[8:], s.Length)
		le.PutUint32(e[12:], s.LKey)
	}
	return nil
}

// CQE is one work completion as it sits in a completion ring:
//
//	 0 wr_id u64     8 qp_num u32    12 byte_len u32
//	16 imm u32      20 src_qp u32    24 opcode u8, status u8, wc_flags u8, sl u8
//	28 pkey_index u16, rsvd u16
type CQE struct {
	WRID      uint64
	QPNum     uint32
	ByteLen   uint32
	Imm       uint32
	SrcQP     uint32
	Opcode    WCOpcode
	Status    Status
	Flags     WCFlags
	PKeyIndex uint16
}

// PutCQE encodes c into b (CQESize bytes).
func PutCQE(b []byte, c *CQE) {
	_ = b[CQESize-1]
	le := binary.LittleEndian
	le.PutUint64(b, c.WRID)
	le.PutUint32(b[8:], c.QPNum)
	le.PutUint32(b[12:], c.ByteLen)
	le.PutUint32(b[16:], c.Imm)
	le.PutUint32(b[20:], c.SrcQP)
	b[24] = byte(c.Opcode)
	b[25] = byte(c.Status)
	b[26] = byte(c.Flags)
	b[27] = 0
	le.PutUint16(b[28:], c.PKeyIndex)
	le.PutUint16(b[30:], 0)
}

// ParseCQE decodes a completion written by the daemon.
func ParseCQE(b []byte, c *CQE) {
	_ = b[CQESize-1]
	le := binary.LittleEndian
	c.WRID = le.Uint64(b)
	c.QPNum = le.Uint32(b[8:])
	c.ByteLen = le.Uint32(b[12:])
	c.Imm = le.Uint32(b[16:])
	c.SrcQP = le.Uint32(b[20:])
	c.Opcode = WCOpcode(b[24])
	c.Status = Status(b[25])
	c.Flags = WCFlags(b[26])
	c.PKeyIndex = le.Uint16(b[28:])
}

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
