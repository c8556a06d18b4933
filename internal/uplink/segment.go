package uplink

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/vrdma/vrdma/internal/wire"
)

// A GSO run is what one UDP GSO send carries: frames that differ only in
// their BTH and payload, the packets of one message to one QP, all but the
// last exactly one path MTU of payload. The kernel (or the NIC) cuts the
// buffer into segments of the first frame's size, the last one shorter or
// equal. Where no device cuts it (a veth pair passes it whole) a raw socket
// sees the whole buffer, one IP packet of the total length; splitSize finds
// the segments again from the BTHs alone, which the rules for runs below
// make unambiguous.

// gsoMaxSegs is the most segments one GSO send carries (the kernel allows
// 64 in older versions, UDP_MAX_SEGMENTS).
const gsoMaxSegs = 64

// gsoMaxPayload is the most UDP payload one GSO send carries: the IP total
// length (IPv4) or payload length (IPv6) is 16 bits.
const gsoMaxPayload = 0xffff - 20 - 8

// segmentOpcode reports whether op can start a run: a FIRST or MIDDLE
// packet, whose payload is exactly the path MTU.
func segmentOpcode(op wire.Opcode) bool {
	f := op.Flags()
	return f&wire.HasPayload != 0 && f&(wire.IsFirst|wire.IsMiddle) != 0 && f&wire.IsLast == 0
}

// mtuSized reports whether a UDP payload of n bytes is one MTU-sized
// packet of opcode op: its headers, 256 to 4096 bytes of payload and the
// ICRC.
func mtuSized(op wire.Opcode, n int) bool {
	switch n - op.HeaderLen() - 4 {
	case 256, 512, 1024, 2048, 4096:
		return true
	}
	return false
}

// bthPSN returns the PSN of the BTH b starts with.
func bthPSN(b []byte) uint32 {
	return uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11])
}

// minSegment is the shortest UDP payload a segment may have: a BTH and
// the ICRC.
const minSegment = 12 + 4

// runHeader returns the length of a frame's IP header and whether the frame
// may be part of a GSO run at all: IPv4 without options, DF set, not a
// fragment; IPv6 with no extension header and flow label 0 (the UDP socket
// that sends runs leaves it 0); room for a UDP header, a BTH and an ICRC.
func runHeader(f []byte) int {
	if len(f) < 40+8+minSegment {
		return 0
	}
	switch f[0] >> 4 {
	case 4:
		if f[0] != 0x45 || f[6] != 0x40 || f[7] != 0 || f[9] != 17 {
			return 0
		}
		return 20
	case 6:
		if f[1]&0x0f != 0 || f[2] != 0 || f[3] != 0 || f[6] != 17 {
			return 0
		}
		return ipv6HeaderLen
	}
	return 0
}

// sameFlow reports whether frames a and b (IP header length hl) have the
// same IP and UDP header but for the lengths, the IPv4 Identification and
// the checksums.
func sameFlow(a, b []byte, hl int) bool {
	if hl == 20 {
		return a[0] == b[0] && a[1] == b[1] && a[6] == b[6] && a[7] == b[7] && a[8] == b[8] && a[9] == b[9] &&
			bytes.Equal(a[12:24], b[12:24])
	}
	return bytes.Equal(a[0:4], b[0:4]) && a[6] == b[6] && a[7] == b[7] && bytes.Equal(a[8:44], b[8:44])
}

// gsoRun returns how many frames from frames[0] on make one GSO run, at
// most max; a result below 2 means frames[0] goes alone. Each frame in the
// run has passed frameFamily. Only the run's last frame may be shorter than
// the first, and only if it is a message's LAST.
func gsoRun(frames [][]byte, max int) int {
	f0 := frames[0]
	hl := runHeader(f0)
	if hl == 0 || len(frames) < 2 {
		return 1
	}
	p0 := f0[hl+8:]
	op := wire.Opcode(p0[0])
	s := len(p0)
	if !segmentOpcode(op) || p0[1]&0x30 != 0 || !mtuSized(op, s) {
		return 1
	}
	psn := bthPSN(p0)
	total := s
	k := 1
	for ; k < len(frames) && k < max; k++ {
		f := frames[k]
		if runHeader(f) != hl {
			break
		}
		if fam, _ := frameFamily(f); fam == 0 {
			break
		}
		p := f[hl+8:]
		if len(p) > s || total+len(p) > gsoMaxPayload || !sameFlow(f0, f, hl) ||
			!bytes.Equal(p[5:8], p0[5:8]) || bthPSN(p) != (psn+uint32(k))&0xffffff {
			break
		}
		if len(p) < s {
			// Only a message's last packet may be shorter: a FIRST
			// followed by MIDDLEs goes alone, the MIDDLEs make the run.
			if wire.Opcode(p[0]).Flags()&wire.IsLast == 0 {
				break
			}
			k++
			break
		}
		total += len(p)
	}
	return k
}

// splitSize returns the segment size (UDP payload bytes) of b, a received
// IP packet whose IP header is hl bytes, if it is a GSO run that no device
// cut up, and 0 if it is one packet. A run starts with a FIRST or MIDDLE
// packet of one MTU, and every segment's BTH names the same QP with the
// next PSN: splitSize tries the five MTUs. A packet that reads both ways (a
// MIDDLE of one MTU whose payload happens to hold such BTHs) is one packet
// if its own ICRC verifies. A run can chain at a smaller MTU than its own
// too, when its payload data holds such BTHs at the smaller spacing: the
// size whose first segment's ICRC verifies wins, and only if none does the
// smallest that chains.
func splitSize(b []byte, hl int) int {
	if len(b) < hl+8+2*minSegment {
		return 0
	}
	p := b[hl+8:]
	op := wire.Opcode(p[0])
	if !segmentOpcode(op) || p[1]&0x30 != 0 {
		return 0
	}
	psn := bthPSN(p)
	first := 0
	for _, mtu := range [...]int{256, 512, 1024, 2048, 4096} {
		s := op.HeaderLen() + mtu + 4
		if s >= len(p) {
			break
		}
		if !segmentsChain(p, s, psn) {
			continue
		}
		if first == 0 {
			if mtuSized(op, len(p)) && wire.VerifyICRC(b) == nil {
				return 0
			}
			first = s
		}
		if firstSegmentICRC(b, hl, s) {
			return s
		}
	}
	return first
}

// firstSegmentICRC reports whether the first s-byte segment of b (IP header
// hl bytes, 20 or 40), with the header forSegments gives it, has an ICRC
// that verifies. It does not allocate.
func firstSegmentICRC(b []byte, hl, s int) bool {
	n := hl + 8
	var m [ipv6HeaderLen + 8 + 12]byte
	copy(m[:n+12], b[:n+12])
	if hl == 20 {
		binary.BigEndian.PutUint16(m[2:4], uint16(n+s))
		m[1], m[8], m[10], m[11] = 0xff, 0xff, 0xff, 0xff // TOS, TTL, checksum
	} else {
		binary.BigEndian.PutUint16(m[4:6], uint16(8+s))
		m[0] |= 0x0f                        // traffic class
		m[1], m[2], m[3] = 0xff, 0xff, 0xff // traffic class, flow label
		m[7] = 0xff                         // hop limit
	}
	binary.BigEndian.PutUint16(m[hl+4:hl+6], uint16(8+s))
	m[hl+6], m[hl+7] = 0xff, 0xff // UDP checksum
	m[n+4] = 0xff                 // BTH FECN, BECN, resv6
	crc := crcSmall(icrcSeed, m[:n+12])
	seg := b[n : n+s]
	crc = crc32.Update(crc, crc32.IEEETable, seg[12:s-4])
	return binary.LittleEndian.Uint32(seg[s-4:]) == crc
}

// segmentsChain reports whether p cut into s-byte segments is a run: each
// later segment long enough and its BTH to the same QP, PSN one more.
func segmentsChain(p []byte, s int, psn uint32) bool {
	j := uint32(1)
	for off := s; off < len(p); off += s {
		q := p[off:]
		if len(q) < minSegment || q[5] != p[5] || q[6] != p[6] || q[7] != p[7] ||
			bthPSN(q) != (psn+j)&0xffffff {
			return false
		}
		j++
	}
	return true
}

// forSegments cuts b, a GSO run of s-byte segments received whole, into
// whole IP packets in place and calls fn with each, in order. Each gets the
// header of b with its own lengths and, for IPv4, the Identification the
// segmentation would have given it (b's plus its index; or b's, if GRO
// merged packets of one fixed ID, which the second segment's ICRC tells)
// and a fresh checksum; its UDP checksum is 0, as rxe sends. Building segment j's
// header overwrites the end of segment j-1, so each slice is valid only
// during its call. hl is 20 or 40.
func forSegments(b []byte, hl, s int, fn func([]byte)) {
	var h [ipv6HeaderLen + 8]byte
	n := hl + 8
	copy(h[:n], b[:n])
	id := binary.BigEndian.Uint16(h[4:6])
	step := uint16(1)
	if hl == 20 && len(b) > n+s {
		step = idStep(h[:n], b[n+s:min(n+2*s, len(b))], id)
	}
	for j, off := 0, n; off < len(b); j, off = j+1, off+s {
		end := min(off+s, len(b))
		f := b[off-n : end]
		copy(f[:n], h[:n])
		seg := end - off
		if hl == 20 {
			binary.BigEndian.PutUint16(f[2:4], uint16(n+seg))
			binary.BigEndian.PutUint16(f[4:6], id+uint16(j)*step)
			f[10], f[11] = 0, 0
			binary.BigEndian.PutUint16(f[10:12], ipv4Checksum(f[:20]))
		} else {
			binary.BigEndian.PutUint16(f[4:6], uint16(8+seg))
		}
		binary.BigEndian.PutUint16(f[hl+4:hl+6], uint16(8+seg))
		f[hl+6], f[hl+7] = 0, 0
		fn(f)
	}
}

// idStep tells how the IPv4 Identifications of the segments of a buffer
// that arrived whole go on: 1 (each one more than the last: what GSO
// segmentation gives, and what GRO merges by default) or 0 (all the same:
// GRO also merges DF packets of a fixed ID). It computes the ICRC of seg,
// the second segment, with h (the buffer's IP and UDP headers, ID id) for
// the ID id+1 and takes 0 only if the one for id matches instead.
func idStep(h []byte, seg []byte, id uint16) uint16 {
	if len(seg) < minSegment {
		return 1
	}
	var m [20 + 8 + 12]byte
	copy(m[:28], h)
	copy(m[28:], seg[:12])
	binary.BigEndian.PutUint16(m[2:4], uint16(28+len(seg)))
	binary.BigEndian.PutUint16(m[4:6], id+1)
	binary.BigEndian.PutUint16(m[24:26], uint16(8+len(seg)))
	m[1], m[8], m[10], m[11] = 0xff, 0xff, 0xff, 0xff // TOS, TTL, checksum
	m[26], m[27] = 0xff, 0xff                         // UDP checksum
	m[28+4] = 0xff                                    // BTH FECN, BECN, resv6
	crc := crcSmall(icrcSeed, m[:])
	crc = crc32.Update(crc, crc32.IEEETable, seg[12:len(seg)-4])
	got := binary.LittleEndian.Uint32(seg[len(seg)-4:])
	if got != crc && got == crc^icrcIDDelta(zeroBytesOp(28+len(seg)-10), (id+1)^id) {
		return 0
	}
	return 1
}

// crcSmall is crc32.Update(crc, crc32.IEEETable, p) a byte at a time, for
// a few dozen bytes: hash/crc32 calls through a function value, so a stack
// array handed to it would escape to the heap.
func crcSmall(crc uint32, p []byte) uint32 {
	t := crc32.IEEETable
	crc = ^crc
	for _, v := range p {
		crc = t[byte(crc)^v] ^ crc>>8
	}
	return ^crc
}

// icrcSeed is the CRC-32 of the 8 bytes of 0xff the ICRC starts with.
var icrcSeed = crc32.ChecksumIEEE([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

// ipv4Checksum returns the header checksum of h, whose checksum field is 0.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
