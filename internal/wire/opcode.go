package wire

// Opcode is the BTH opcode: the transport in bits 7-5 (RC 0x00, UC 0x20,
// UD 0x60, CNP 0x80, XRC 0xa0) and the operation in bits 4-0.
type Opcode uint8

// Transport classes, the high three bits of an Opcode.
const (
	TransportRC  Opcode = 0x00
	TransportUC  Opcode = 0x20
	TransportRD  Opcode = 0x40
	TransportUD  Opcode = 0x60
	TransportCNP Opcode = 0x80
	TransportXRC Opcode = 0xa0 // eXtended Reliable Connected: RC's operations, requests with an XRCETH
)

// Operations, the low five bits of an Opcode (IBTA 9.2.1; include/rdma/ib_pack.h).
const (
	OpSendFirst         Opcode = 0x00
	OpSendMiddle        Opcode = 0x01
	OpSendLast          Opcode = 0x02
	OpSendLastImm       Opcode = 0x03
	OpSendOnly          Opcode = 0x04
	OpSendOnlyImm       Opcode = 0x05
	OpWriteFirst        Opcode = 0x06
	OpWriteMiddle       Opcode = 0x07
	OpWriteLast         Opcode = 0x08
	OpWriteLastImm      Opcode = 0x09
	OpWriteOnly         Opcode = 0x0a
	OpWriteOnlyImm      Opcode = 0x0b
	OpReadRequest       Opcode = 0x0c
	OpReadResponseFirst Opcode = 0x0d
	OpReadResponseMid   Opcode = 0x0e
	OpReadResponseLast  Opcode = 0x0f
	OpReadResponseOnly  Opcode = 0x10
	OpAcknowledge       Opcode = 0x11
	OpAtomicAcknowledge Opcode = 0x12
	OpCompareSwap       Opcode = 0x13
	OpFetchAdd          Opcode = 0x14
	OpSendLastInv       Opcode = 0x16
	OpSendOnlyInv       Opcode = 0x17
	// OpAtomicWrite is IBTA 1.5's RDMA ATOMIC WRITE (RC only): a RETH and
	// 8 bytes of payload, answered by an RDMA READ Response Only without
	// payload (rxe's responder).
	OpAtomicWrite Opcode = 0x1d
	// OpFlush is IBTA 1.5's RDMA FLUSH (RC only): an FETH (placement type,
	// selectivity level) and a RETH, answered by an RDMA READ Response Only
	// without payload (rxe's responder).
	OpFlush Opcode = 0x1c
)

// Transport returns the opcode's transport class.
func (o Opcode) Transport() Opcode { return o & 0xe0 }

// Op returns the opcode's operation, without the transport class.
func (o Opcode) Op() Opcode { return o & 0x1f }

// Header flags: which extended headers follow the BTH, and what the opcode is.
const (
	HasRETH = 1 << iota
	HasAETH
	HasAtomicETH
	HasAtomicAckETH
	HasImm
	HasIETH
	HasDETH
	HasPayload
	IsRequest
	IsResponse
	IsFirst
	IsMiddle
	IsLast
	IsSend
	IsWrite
	IsRead
	IsAtomic
	IsAtomicWrite
	HasFETH
	IsFlush
	HasXRCETH
)

// opInfo describes one valid opcode.
type opInfo struct {
	flags  uint32
	hdrLen uint8 // BTH plus extended headers
	name   string
}

// The header lengths of rxe_opcode.c: BTH 12, FETH 4, RETH 16, AETH 4, AtomicETH 28,
// AtomicAckETH 8, ImmDt 4, IETH 4, DETH 8; XRCETH 4 (IBTA 9.3.1).
var opTable [256]opInfo

func init() {
	type op struct {
		o     Opcode
		flags uint32
		name  string
	}
	common := []op{
		{OpSendFirst, IsRequest | IsSend | IsFirst | HasPayload, "SEND First"},
		{OpSendMiddle, IsRequest | IsSend | IsMiddle | HasPayload, "SEND Middle"},
		{OpSendLast, IsRequest | IsSend | IsLast | HasPayload, "SEND Last"},
		{OpSendLastImm, IsRequest | IsSend | IsLast | HasPayload | HasImm, "SEND Last with Immediate"},
		{OpSendOnly, IsRequest | IsSend | IsFirst | IsLast | HasPayload, "SEND Only"},
		{OpSendOnlyImm, IsRequest | IsSend | IsFirst | IsLast | HasPayload | HasImm, "SEND Only with Immediate"},
		{OpWriteFirst, IsRequest | IsWrite | IsFirst | HasPayload | HasRETH, "RDMA WRITE First"},
		{OpWriteMiddle, IsRequest | IsWrite | IsMiddle | HasPayload, "RDMA WRITE Middle"},
		{OpWriteLast, IsRequest | IsWrite | IsLast | HasPayload, "RDMA WRITE Last"},
		{OpWriteLastImm, IsRequest | IsWrite | IsLast | HasPayload | HasImm, "RDMA WRITE Last with Immediate"},
		{OpWriteOnly, IsRequest | IsWrite | IsFirst | IsLast | HasPayload | HasRETH, "RDMA WRITE Only"},
		{OpWriteOnlyImm, IsRequest | IsWrite | IsFirst | IsLast | HasPayload | HasRETH | HasImm, "RDMA WRITE Only with Immediate"},
	}
	rcOnly := []op{
		{OpReadRequest, IsRequest | IsRead | IsFirst | IsLast | HasRETH, "RDMA READ Request"},
		{OpReadResponseFirst, IsResponse | IsRead | IsFirst | HasPayload | HasAETH, "RDMA READ Response First"},
		{OpReadResponseMid, IsResponse | IsRead | IsMiddle | HasPayload, "RDMA READ Response Middle"},
		{OpReadResponseLast, IsResponse | IsRead | IsLast | HasPayload | HasAETH, "RDMA READ Response Last"},
		{OpReadResponseOnly, IsResponse | IsRead | IsFirst | IsLast | HasPayload | HasAETH, "RDMA READ Response Only"},
		{OpAcknowledge, IsResponse | HasAETH, "Acknowledge"},
		{OpAtomicAcknowledge, IsResponse | IsAtomic | HasAETH | HasAtomicAckETH, "Atomic Acknowledge"},
		{OpCompareSwap, IsRequest | IsAtomic | IsFirst | IsLast | HasAtomicETH, "CmpSwap"},
		{OpFetchAdd, IsRequest | IsAtomic | IsFirst | IsLast | HasAtomicETH, "FetchAdd"},
		{OpSendLastInv, IsRequest | IsSend | IsLast | HasPayload | HasIETH, "SEND Last with Invalidate"},
		{OpSendOnlyInv, IsRequest | IsSend | IsFirst | IsLast | HasPayload | HasIETH, "SEND Only with Invalidate"},
		{OpAtomicWrite, IsRequest | IsAtomicWrite | IsFirst | IsLast | HasPayload | HasRETH, "RDMA ATOMIC WRITE"},
		{OpFlush, IsRequest | IsFlush | IsFirst | IsLast | HasFETH | HasRETH, "RDMA FLUSH"},
	}
	set := func(o Opcode, flags uint32, name string) {
		n := 12
		if flags&HasFETH != 0 {
			n += 4
		}
		if flags&HasRETH != 0 {
			n += 16
		}
		if flags&HasAETH != 0 {
			n += 4
		}
		if flags&HasAtomicETH != 0 {
			n += 28
		}
		if flags&HasAtomicAckETH != 0 {
			n += 8
		}
		if flags&HasImm != 0 {
			n += 4
		}
		if flags&HasIETH != 0 {
			n += 4
		}
		if flags&HasDETH != 0 {
			n += 8
		}
		if flags&HasXRCETH != 0 {
			n += xrcethLen
		}
		opTable[o] = opInfo{flags: flags, hdrLen: uint8(n), name: name}
	}
	for _, x := range common {
		set(TransportRC|x.o, x.flags, "RC "+x.name)
		set(TransportUC|x.o, x.flags, "UC "+x.name)
	}
	for _, x := range rcOnly {
		set(TransportRC|x.o, x.flags, "RC "+x.name)
	}
	// XRC has every RC operation; its requests carry the XRCETH naming the
	// receiver's XRC SRQ, its responses (ACKs, READ responses) do not.
	for _, x := range append(common, rcOnly...) {
		f := x.flags
		if f&(IsAtomicWrite|IsFlush) != 0 {
			continue // IBTA 1.5's: RC only here
		}
		if f&IsRequest != 0 {
			f |= HasXRCETH
		}
		set(TransportXRC|x.o, f, "XRC "+x.name)
	}
	set(TransportUD|OpSendOnly, IsRequest|IsSend|IsFirst|IsLast|HasPayload|HasDETH, "UD SEND Only")
	set(TransportUD|OpSendOnlyImm, IsRequest|IsSend|IsFirst|IsLast|HasPayload|HasDETH|HasImm, "UD SEND Only with Immediate")
}

// Valid reports whether o is an opcode vrdma speaks (RC, UC, UD or XRC).
func (o Opcode) Valid() bool { return opTable[o].hdrLen != 0 }

// Flags returns the Has*/Is* flags of a valid opcode, 0 otherwise.
func (o Opcode) Flags() uint32 { return opTable[o].flags }

// HeaderLen returns the length of the BTH and the extended headers of a
// valid opcode, 0 otherwise.
func (o Opcode) HeaderLen() int { return int(opTable[o].hdrLen) }

// String returns the opcode's name as Wireshark prints it, with its transport.
func (o Opcode) String() string {
	if n := opTable[o].name; n != "" {
		return n
	}
	return "opcode 0x" + string("0123456789abcdef"[o>>4]) + string("0123456789abcdef"[o&15])
}
