package uplink

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// Test frames built by hand, with an ICRC computed as rxe does
// (REFERENCE.md §1.5), so that the tests need nothing from package wire.

// testBTH is an RC SEND Only to QP 0x11, PSN 0x123456, P_Key 0xFFFF.
var testBTH = []byte{0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x12, 0x34, 0x56}

func testFrame4(src, dst netip.Addr, id uint16, tos uint8, sport, dport uint16, payload []byte) []byte {
	udpLen := 8 + len(testBTH) + len(payload) + 4
	f := make([]byte, 20+udpLen)
	f[0], f[1] = 0x45, tos
	binary.BigEndian.PutUint16(f[2:], uint16(len(f)))
	binary.BigEndian.PutUint16(f[4:], id)
	f[6] = 0x40 // DF
	f[8], f[9] = 64, 17
	s, d := src.As4(), dst.As4()
	copy(f[12:16], s[:])
	copy(f[16:20], d[:])
	binary.BigEndian.PutUint16(f[10:], ipChecksum(f[:20]))
	fillUDP(f[20:], sport, dport, payload)
	binary.LittleEndian.PutUint32(f[len(f)-4:], testICRC(f))
	return f
}

func testFrame6(src, dst netip.Addr, tc uint8, flow uint32, sport, dport uint16, payload []byte) []byte {
	udpLen := 8 + len(testBTH) + len(payload) + 4
	f := make([]byte, 40+udpLen)
	binary.BigEndian.PutUint32(f[0:], 6<<28|uint32(tc)<<20|flow&0xFFFFF)
	binary.BigEndian.PutUint16(f[4:], uint16(udpLen))
	f[6], f[7] = 17, 64
	s, d := src.As16(), dst.As16()
	copy(f[8:24], s[:])
	copy(f[24:40], d[:])
	fillUDP(f[40:], sport, dport, payload)
	binary.LittleEndian.PutUint32(f[len(f)-4:], testICRC(f))
	return f
}

// fillUDP writes the UDP header (checksum 0, as rxe sends), the BTH and the
// payload; the ICRC comes last.
func fillUDP(u []byte, sport, dport uint16, payload []byte) {
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	copy(u[8:], testBTH)
	copy(u[8+len(testBTH):], payload)
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// testICRC computes the ICRC of a whole frame (its last 4 bytes excluded).
func testICRC(f []byte) uint32 {
	ipLen := 40
	if f[0]>>4 == 4 {
		ipLen = int(f[0]&0xf) * 4
	}
	hdr := append([]byte(nil), f[:ipLen+8+12]...)
	if ipLen == 40 {
		hdr[0] |= 0x0f
		hdr[1], hdr[2], hdr[3] = 0xff, 0xff, 0xff // traffic class, flow label
		hdr[7] = 0xff                             // hop limit
	} else {
		hdr[1] = 0xff                 // TOS
		hdr[8] = 0xff                 // TTL
		hdr[10], hdr[11] = 0xff, 0xff // checksum
	}
	hdr[ipLen+6], hdr[ipLen+7] = 0xff, 0xff // UDP checksum
	hdr[ipLen+8+4] = 0xff                   // BTH FECN, BECN, reserved
	crc := crc32.Update(0, crc32.IEEETable, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	crc = crc32.Update(crc, crc32.IEEETable, hdr)
	return crc32.Update(crc, crc32.IEEETable, f[ipLen+8+12:len(f)-4])
}

// icrcOK reports whether a received frame's ICRC verifies.
func icrcOK(f []byte) bool {
	return len(f) > 4 && binary.LittleEndian.Uint32(f[len(f)-4:]) == testICRC(f)
}
