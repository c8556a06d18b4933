package wire

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// padLen is the number of pad bytes that make n payload bytes a multiple of 4.
func padLen(n int) int { return -n & 3 }

// transportHeaderLen is the BTH plus extended headers of op; an opcode that
// is not Valid (a CNP, say) gets a bare BTH.
func transportHeaderLen(op Opcode) int {
	if n := op.HeaderLen(); n != 0 {
		return n
	}
	return bthLen
}

// is4 reports whether p is sent over IPv4: its Dst (or, if Dst is the zero
// Addr, its Src) is an IPv4 address. An IPv4-mapped IPv6 address means
// IPv6, as Decode reads it from an IPv6 header: Unmap GIDs first.
func is4(p *Packet) bool {
	a := p.Dst
	if !a.IsValid() {
		a = p.Src
	}
	return a.Is4()
}

// EncodedLen returns the number of bytes Append adds for p with payloadLen
// bytes of payload: IP, UDP and transport headers, payload, pad and ICRC.
func EncodedLen(p *Packet, payloadLen int) int {
	n := ipv6Len
	if is4(p) {
		n = ipv4MinLen
	}
	return n + udpLen + transportHeaderLen(p.Opcode) + payloadLen + padLen(payloadLen) + icrcLen
}

// AppendHeaders appends to dst the headers of p for a payload of payloadLen
// bytes, with every length field computed for that payload, its pad and the
// ICRC: the IP header, the UDP header, the BTH and the extended headers of
// p.Opcode.
//
// IPv4 (Dst, or Src if Dst is the zero Addr, is IPv4; an IPv4-mapped IPv6
// address means IPv6) gets a 20-byte header: IHL 5, TOS p.TOS, ID p.IPID, DF from p.DF, TTL p.TTL and
// its header checksum. IPv6 gets traffic class p.TOS, flow label
// p.FlowLabel, hop limit p.TTL and next header UDP. UDP carries p.SrcPort
// and p.DstPort (UDPPort if 0) and checksum 0, as rxe sends it. The BTH
// takes every field from p except PadCnt, which is (-payloadLen)&3; byte 4
// has FECN and BECN and zero reserved bits, and the AckReq byte zero
// reserved bits. An opcode that is not Valid gets a bare BTH.
//
// The payload must follow, then AppendTrailer. payloadLen must keep the
// packet within 65535 bytes. AppendHeaders allocates only if dst lacks the
// capacity.
func AppendHeaders(dst []byte, p *Packet, payloadLen int) []byte {
	pad := padLen(payloadLen)
	udpTotal := udpLen + transportHeaderLen(p.Opcode) + payloadLen + pad + icrcLen
	if is4(p) {
		dst = appendIPv4(dst, p, ipv4MinLen+udpTotal)
	} else {
		dst = appendIPv6(dst, p, udpTotal)
	}
	dport := p.DstPort
	if dport == 0 {
		dport = UDPPort
	}
	dst = binary.BigEndian.AppendUint16(dst, p.SrcPort)
	dst = binary.BigEndian.AppendUint16(dst, dport)
	dst = binary.BigEndian.AppendUint16(dst, uint16(udpTotal))
	dst = append(dst, 0, 0)
	dst = appendBTH(dst, p, pad)
	return appendExtHeaders(dst, p)
}

// AppendTrailer appends the pad (zeros, as many as the BTH's PadCnt says)
// and the ICRC (little-endian) to frame, a whole IP packet whose headers
// AppendHeaders wrote and whose payload follows them. frame must start at
// the IP header; to keep a link-layer header in front of it, give frame
// enough spare capacity (EncodedLen) so that it is extended in place. It
// allocates only if frame lacks the capacity.
func AppendTrailer(frame []byte) []byte {
	pad := 0
	if hl, err := ipHeaderLen(frame); err == nil && len(frame) > hl+udpLen+1 {
		pad = int(frame[hl+udpLen+1]>>4) & 3
	}
	var zeros [3 + icrcLen]byte
	frame = append(frame, zeros[:pad+icrcLen]...)
	binary.LittleEndian.PutUint32(frame[len(frame)-icrcLen:], ICRC(frame))
	return frame
}

// Append appends p, with p.Payload as its payload, to dst as a whole IP
// packet: AppendHeaders, the payload, AppendTrailer. It grows dst at most
// once, and not at all if dst has EncodedLen(p, len(p.Payload)) bytes of
// spare capacity.
func Append(dst []byte, p *Packet) []byte {
	dst = slices.Grow(dst, EncodedLen(p, len(p.Payload)))
	start := len(dst)
	dst = AppendHeaders(dst, p, len(p.Payload))
	dst = append(dst, p.Payload...)
	frame := AppendTrailer(dst[start:])
	return dst[:start+len(frame)]
}

// appendIPv4 appends a 20-byte IPv4 header for a packet of total bytes.
func appendIPv4(dst []byte, p *Packet, total int) []byte {
	var frag byte
	if p.DF {
		frag = 0x40
	}
	src, d := addr4(p.Src), addr4(p.Dst)
	start := len(dst)
	dst = append(dst,
		0x45, p.TOS, byte(total>>8), byte(total),
		byte(p.IPID>>8), byte(p.IPID), frag, 0,
		p.TTL, protoUDP, 0, 0,
		src[0], src[1], src[2], src[3],
		d[0], d[1], d[2], d[3])
	binary.BigEndian.PutUint16(dst[start+10:], ipv4Checksum(dst[start:start+ipv4MinLen]))
	return dst
}

// appendIPv6 appends a 40-byte IPv6 header for payloadLen bytes after it.
func appendIPv6(dst []byte, p *Packet, payloadLen int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, 6<<28|uint32(p.TOS)<<20|p.FlowLabel&0xfffff)
	dst = binary.BigEndian.AppendUint16(dst, uint16(payloadLen))
	dst = append(dst, protoUDP, p.TTL)
	src, d := p.Src.As16(), p.Dst.As16()
	dst = append(dst, src[:]...)
	return append(dst, d[:]...)
}

// addr4 returns the IPv4 address of a, or zeros if a is not IPv4 or
// IPv4-mapped.
func addr4(a netip.Addr) [4]byte {
	if a.Is4() || a.Is4In6() {
		return a.Unmap().As4()
	}
	return [4]byte{}
}

// ipv4Checksum returns the Internet checksum of h, an IPv4 header whose
// checksum field is zero.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// appendBTH appends the 12-byte BTH of p with PadCnt pad.
func appendBTH(dst []byte, p *Packet, pad int) []byte {
	b1 := byte(pad&3)<<4 | p.TVer&0x0f
	if p.SE {
		b1 |= 0x80
	}
	if p.MigReq {
		b1 |= 0x40
	}
	var b4 byte
	if p.FECN {
		b4 |= 0x80
	}
	if p.BECN {
		b4 |= 0x40
	}
	var b8 byte
	if p.AckReq {
		b8 = 0x80
	}
	return append(dst,
		byte(p.Opcode), b1, byte(p.PKey>>8), byte(p.PKey),
		b4, byte(p.DestQP>>16), byte(p.DestQP>>8), byte(p.DestQP),
		b8, byte(p.PSN>>16), byte(p.PSN>>8), byte(p.PSN))
}

// appendExtHeaders appends the extended transport headers of p.Opcode in
// IBA order: DETH, FETH or XRCETH, RETH or AtomicETH, ImmDt or IETH, AETH,
// AtomicAckETH.
func appendExtHeaders(dst []byte, p *Packet) []byte {
	f := p.Opcode.Flags()
	be := binary.BigEndian
	if f&HasFETH != 0 {
		dst = be.AppendUint32(dst, uint32(p.FETH.Selectivity&3)<<4|uint32(p.FETH.Placement&0xf))
	}
	if f&HasDETH != 0 {
		dst = be.AppendUint32(dst, p.DETH.QKey)
		dst = be.AppendUint32(dst, p.DETH.SrcQP&0xffffff)
	}
	if f&HasXRCETH != 0 {
		dst = p.XRCETH.Append(dst)
	}
	if f&HasRETH != 0 {
		dst = be.AppendUint64(dst, p.RETH.VA)
		dst = be.AppendUint32(dst, p.RETH.RKey)
		dst = be.AppendUint32(dst, p.RETH.Length)
	}
	if f&HasAtomicETH != 0 {
		dst = be.AppendUint64(dst, p.Atomic.VA)
		dst = be.AppendUint32(dst, p.Atomic.RKey)
		dst = be.AppendUint64(dst, p.Atomic.SwapAdd)
		dst = be.AppendUint64(dst, p.Atomic.Compare)
	}
	if f&HasImm != 0 {
		dst = be.AppendUint32(dst, p.Imm)
	}
	if f&HasIETH != 0 {
		dst = be.AppendUint32(dst, p.InvRKey)
	}
	if f&HasAETH != 0 {
		dst = be.AppendUint32(dst, uint32(p.AETH.Syndrome)<<24|p.AETH.MSN&0xffffff)
	}
	if f&HasAtomicAckETH != 0 {
		dst = be.AppendUint64(dst, p.AtomicAck)
	}
	return dst
}
