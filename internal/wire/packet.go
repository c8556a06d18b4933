package wire

import "net/netip"

// UDPPort is the RoCEv2 destination port (IANA).
const UDPPort = 4791

// Packet is one decoded RoCEv2 packet. Decoders fill it in place; encoders
// read it. Payload aliases the buffer it was decoded from.
type Packet struct {
	// Network and UDP. Src and Dst are IPv4 (Is4) or IPv6 addresses
	// without a zone.
	Src, Dst  netip.Addr
	TOS       uint8  // IPv4 TOS or IPv6 traffic class (DSCP<<2 | ECN)
	TTL       uint8  // IPv4 TTL or IPv6 hop limit
	IPID      uint16 // IPv4 Identification
	DF        bool   // IPv4 Don't Fragment
	FlowLabel uint32 // IPv6 flow label (20 bits)
	SrcPort   uint16
	DstPort   uint16

	// BTH.
	Opcode Opcode
	SE     bool // solicited event
	MigReq bool
	PadCnt uint8 // 0..3, set by the encoder from len(Payload)
	TVer   uint8
	PKey   uint16
	FECN   bool
	BECN   bool
	DestQP uint32 // 24 bits
	AckReq bool
	PSN    uint32 // 24 bits

	// Extended headers; which are present follows from Opcode.Flags().
	FETH      FETH
	XRCETH    XRCETH
	RETH      RETH
	AETH      AETH
	Atomic    AtomicETH
	AtomicAck uint64 // AtomicAckETH: the original remote value
	Imm       uint32 // ImmDt, in network order as a big-endian uint32
	InvRKey   uint32 // IETH
	DETH      DETH

	Payload []byte
}

// XRCETH is the XRC Extended Transport Header (IBTA 9.3.1; Wireshark's
// infiniband.xrceth): the 24-bit number of the XRC SRQ that a request sent
// to an XRC target QP is for. It follows the BTH and precedes a RETH or
// AtomicETH.
type XRCETH struct {
	SRQN uint32 // 24 bits
}

// RETH is the RDMA Extended Transport Header.
type RETH struct {
	VA     uint64
	RKey   uint32
	Length uint32
}

// FETH is the FLUSH Extended Transport Header (IBTA 1.5): one big-endian
// word, the placement type in bits 3-0 and the selectivity level in bits
// 5-4; the other bits are reserved (0: Decode refuses others).
type FETH struct {
	Placement   uint8 // FlushGlobal, FlushPersistent or both
	Selectivity uint8 // FlushRange or FlushRegion
}

// FLUSH placement types and selectivity levels (IBTA 1.5, rxe's
// IB_FLUSH_GLOBAL/_PERSISTENT and IB_FLUSH_RANGE/_MR).
const (
	FlushGlobal     = 1 << 0
	FlushPersistent = 1 << 1
	FlushRange      = 0
	FlushRegion     = 1
)

// AETH is the ACK Extended Transport Header.
type AETH struct {
	Syndrome uint8
	MSN      uint32 // 24 bits
}

// AtomicETH is the Atomic Extended Transport Header.
type AtomicETH struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

// DETH is the Datagram Extended Transport Header.
type DETH struct {
	QKey  uint32
	SrcQP uint32 // 24 bits
}

// AETH syndromes (IBTA 9.7.5.1; rxe_hdr.h).
const (
	SyndromeACK        = 0x1f // ACK with credit field "invalid", as rxe sends
	SyndromeRNR        = 0x20 // | the 5-bit RNR timer code
	SyndromeNAKSeq     = 0x60 // PSN sequence error
	SyndromeNAKInvReq  = 0x61 // invalid request
	SyndromeNAKAccess  = 0x62 // remote access error
	SyndromeNAKOpError = 0x63 // remote operational error
)

// SyndromeKind returns the top three bits that say ACK (0), RNR NAK (1) or NAK (3).
func SyndromeKind(s uint8) uint8 { return s >> 5 }

// DefaultPKey is the full-membership default partition key rxe sends.
const DefaultPKey = 0xffff

// GSIQKey is the Q_Key of QP1, the general services interface.
const GSIQKey = 0x80010000
