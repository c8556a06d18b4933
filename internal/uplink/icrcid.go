package uplink

import "hash/crc32"

// The IPv4 Identification is inside the ICRC (REFERENCE.md §1.5). A UDP GSO
// send lets the kernel number the segments (0, 1, 2, ... from an
// unconnected DF socket), so the sender rewrites each frame's ICRC for the
// number the segment will carry. The CRC is affine: for two messages of the
// same length, CRC(a) ^ CRC(b) is the raw (zero-start, no final inversion)
// CRC of a ^ b. When only the two ID bytes differ, that is the raw CRC of
// the two differing bytes shifted over the bytes that follow them, which
// takes a few dozen operations instead of a pass over the packet.

// crcPoly is the reflected IEEE CRC-32 polynomial.
const crcPoly = 0xedb88320

// x2nTable[k] is x^(2^k) modulo the polynomial, in reflected form.
var x2nTable [32]uint32

func init() {
	p := uint32(1) << 30 // x^1
	x2nTable[0] = p
	for k := 1; k < 32; k++ {
		p = multModP(p, p)
		x2nTable[k] = p
	}
}

// multModP multiplies a and b modulo the polynomial (reflected form).
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// zeroBytesOp returns x^(8n) modulo the polynomial: multiplying a raw CRC
// state by it is feeding it n zero bytes.
func zeroBytesOp(n int) uint32 {
	p := uint32(1) << 31 // x^0
	k := 3               // 2^3 bits a byte
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			p = multModP(x2nTable[k&31], p)
		}
		k++
	}
	return p
}

// icrcIDDelta returns what to xor into the ICRC of an IPv4 frame of
// total length totLen (the ICRC value, not its little-endian bytes) when
// its Identification changes by the bits of d. op is zeroBytesOp(totLen-10):
// the ICRC covers 8 bytes of 0xff and the packet less its last 4 bytes, and
// the ID is the covered message's bytes 12 and 13.
func icrcIDDelta(op uint32, d uint16) uint32 {
	if d == 0 {
		return 0
	}
	t := crc32.IEEETable
	c := t[byte(d>>8)]
	c = t[byte(c)^byte(d)] ^ c>>8
	return multModP(op, c)
}
