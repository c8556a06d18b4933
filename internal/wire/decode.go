package wire

import (
	"encoding/binary"
	"net/netip"
)

// IP protocol number of UDP, and the fixed header sizes the codec uses.
const (
	protoUDP   = 17
	ipv4MinLen = 20
	ipv6Len    = 40
	udpLen     = 8
	bthLen     = 12
	icrcLen    = 4

	dethLen      = 8
	rethLen      = 16
	atomicETHLen = 28
	aethLen      = 4
	xrcethLen    = 4
)

// Decode parses b, a whole IPv4 or IPv6 packet (no link-layer header)
// carrying UDP to port 4791, into p.
//
// It checks that the IPv4 total length or IPv6 payload length, the UDP
// length and len(b) agree, that b is long enough for the BTH, the opcode's
// extended headers and the ICRC, that the opcode is Valid, that TVer is 0,
// and that PadCnt fits the payload and makes it a multiple of 4 bytes.
// b must end where the IP packet ends: cut Ethernet padding off first
// (pcap.IPPayloadOfFrame does), or Decode reports ErrLength.
// IPv4 options are skipped (IHL is honoured); IPv4 fragments are refused,
// and the IPv6 next header must be UDP (no extension headers). The IPv4
// header checksum, the UDP checksum and the ICRC are not checked (see
// VerifyICRC).
//
// Decode resets *p first, so fields of headers the opcode lacks are zero.
// On success p.Payload aliases b: the payload without pad and ICRC, with
// its capacity clipped to its length. On error *p holds partial results.
// Decode never allocates and never panics, whatever b holds.
func Decode(b []byte, p *Packet) error {
	*p = Packet{}
	if len(b) == 0 {
		return errEmpty
	}
	var udp []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < ipv4MinLen {
			return errIPv4Short
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < ipv4MinLen {
			return errIPv4IHL
		}
		if len(b) < ihl {
			return errIPv4HdrShort
		}
		total := int(binary.BigEndian.Uint16(b[2:]))
		if total > len(b) {
			return errIPv4TotalLong
		}
		if total != len(b) {
			return errIPv4TotalBad
		}
		frag := binary.BigEndian.Uint16(b[6:])
		if frag&0x3fff != 0 { // MF or a fragment offset
			return errIPv4Frag
		}
		if b[9] != protoUDP {
			return errIPv4Proto
		}
		p.TOS = b[1]
		p.IPID = binary.BigEndian.Uint16(b[4:])
		p.DF = frag&0x4000 != 0
		p.TTL = b[8]
		p.Src = netip.AddrFrom4([4]byte(b[12:16]))
		p.Dst = netip.AddrFrom4([4]byte(b[16:20]))
		udp = b[ihl:]
	case 6:
		if len(b) < ipv6Len {
			return errIPv6Short
		}
		n := ipv6Len + int(binary.BigEndian.Uint16(b[4:]))
		if n > len(b) {
			return errIPv6PayLong
		}
		if n != len(b) {
			return errIPv6PayBad
		}
		if b[6] != protoUDP {
			return errIPv6Next
		}
		vtf := binary.BigEndian.Uint32(b)
		p.TOS = uint8(vtf >> 20)
		p.FlowLabel = vtf & 0xfffff
		p.TTL = b[7]
		p.Src = netip.AddrFrom16([16]byte(b[8:24]))
		p.Dst = netip.AddrFrom16([16]byte(b[24:40]))
		udp = b[ipv6Len:]
	default:
		return errIPVersion
	}
	if len(udp) < udpLen {
		return errUDPShort
	}
	p.SrcPort = binary.BigEndian.Uint16(udp)
	p.DstPort = binary.BigEndian.Uint16(udp[2:])
	if p.DstPort != UDPPort {
		return errUDPPort
	}
	if int(binary.BigEndian.Uint16(udp[4:])) != len(udp) {
		return errUDPLength
	}
	return decodeTransport(udp[udpLen:], p)
}

// DecodeTransport parses b, a UDP payload from the BTH up to and including
// the ICRC, into the BTH, extended-header and Payload fields of p, which it
// resets first; the network and UDP fields of p are left as they are. It
// makes the checks of Decode that concern the transport headers. p.Payload
// aliases b. It never allocates and never panics.
func DecodeTransport(b []byte, p *Packet) error {
	p.Opcode, p.SE, p.MigReq, p.PadCnt, p.TVer = 0, false, false, 0, 0
	p.PKey, p.FECN, p.BECN, p.DestQP, p.AckReq, p.PSN = 0, false, false, 0, false, 0
	p.FETH, p.RETH, p.AETH, p.Atomic, p.AtomicAck = FETH{}, RETH{}, AETH{}, AtomicETH{}, 0
	p.Imm, p.InvRKey, p.DETH, p.XRCETH, p.Payload = 0, 0, DETH{}, XRCETH{}, nil
	return decodeTransport(b, p)
}

// decodeTransport is DecodeTransport on a zeroed transport part of p.
func decodeTransport(b []byte, p *Packet) error {
	if len(b) < bthLen+icrcLen {
		return errBTHShort
	}
	op := Opcode(b[0])
	if !op.Valid() {
		return errOpcode
	}
	if b[1]&0x0f != 0 {
		return errTVer
	}
	hl := op.HeaderLen()
	if len(b) < hl+icrcLen {
		return errHdrShort
	}
	flags := op.Flags()
	pad := int(b[1]>>4) & 3
	n := len(b) - hl - icrcLen // payload and pad
	if pad > n {
		return errPad
	}
	if n&3 != 0 {
		return errAlign
	}
	if n > pad && flags&HasPayload == 0 {
		return errNoPayload
	}

	p.Opcode = op
	p.SE = b[1]&0x80 != 0
	p.MigReq = b[1]&0x40 != 0
	p.PadCnt = uint8(pad)
	p.PKey = binary.BigEndian.Uint16(b[2:])
	p.FECN = b[4]&0x80 != 0
	p.BECN = b[4]&0x40 != 0
	p.DestQP = binary.BigEndian.Uint32(b[4:]) & 0xffffff
	p.AckReq = b[8]&0x80 != 0
	p.PSN = binary.BigEndian.Uint32(b[8:]) & 0xffffff

	// Extended headers in IBA order: DETH, FETH or XRCETH, RETH or AtomicETH,
	// ImmDt or IETH, AETH, AtomicAckETH.
	h := b[bthLen:hl]
	if flags&HasFETH != 0 {
		f := binary.BigEndian.Uint32(h)
		if f>>6 != 0 {
			return errFETH
		}
		p.FETH = FETH{Placement: uint8(f & 0xf), Selectivity: uint8(f>>4) & 3}
		h = h[4:]
	}
	if flags&HasDETH != 0 {
		p.DETH.QKey = binary.BigEndian.Uint32(h)
		p.DETH.SrcQP = binary.BigEndian.Uint32(h[4:]) & 0xffffff
		h = h[dethLen:]
	}
	if flags&HasXRCETH != 0 {
		p.XRCETH, _ = ParseXRCETH(h)
		h = h[xrcethLen:]
	}
	if flags&HasRETH != 0 {
		p.RETH.VA = binary.BigEndian.Uint64(h)
		p.RETH.RKey = binary.BigEndian.Uint32(h[8:])
		p.RETH.Length = binary.BigEndian.Uint32(h[12:])
		h = h[rethLen:]
	}
	if flags&HasAtomicETH != 0 {
		p.Atomic.VA = binary.BigEndian.Uint64(h)
		p.Atomic.RKey = binary.BigEndian.Uint32(h[8:])
		p.Atomic.SwapAdd = binary.BigEndian.Uint64(h[12:])
		p.Atomic.Compare = binary.BigEndian.Uint64(h[20:])
		h = h[atomicETHLen:]
	}
	if flags&HasImm != 0 {
		p.Imm = binary.BigEndian.Uint32(h)
		h = h[4:]
	}
	if flags&HasIETH != 0 {
		p.InvRKey = binary.BigEndian.Uint32(h)
		h = h[4:]
	}
	if flags&HasAETH != 0 {
		p.AETH.Syndrome = h[0]
		p.AETH.MSN = binary.BigEndian.Uint32(h) & 0xffffff
		h = h[aethLen:]
	}
	if flags&HasAtomicAckETH != 0 {
		p.AtomicAck = binary.BigEndian.Uint64(h)
	}
	end := hl + n - pad
	p.Payload = b[hl:end:end]
	return nil
}
