package wire

import (
	"encoding/binary"
	"hash/crc32"
)

// crcSlice8 holds the tables of a slicing-by-8 IEEE CRC-32: crcSlice8[0]
// is crc32.IEEETable, crcSlice8[k][i] the CRC state after byte i and then
// k zero bytes.
//
// ICRC hashes its masked copy of the IP, UDP and BTH headers with
// crcUpdate rather than crc32.Update: hash/crc32 dispatches through a
// function value, so a stack array handed to it escapes to the heap, which
// would cost an allocation per packet.
var crcSlice8 [8][256]uint32

func init() {
	crcSlice8[0] = *crc32.IEEETable
	for i := range 256 {
		c := crcSlice8[0][i]
		for k := 1; k < 8; k++ {
			c = crcSlice8[0][byte(c)] ^ c>>8
			crcSlice8[k][i] = c
		}
	}
}

// crcUpdate is crc32.Update(crc, crc32.IEEETable, p), for short p.
func crcUpdate(crc uint32, p []byte) uint32 {
	t := &crcSlice8
	crc = ^crc
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint32(p)
		crc = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][crc>>24] ^ t[5][byte(crc>>16)] ^ t[6][byte(crc>>8)] ^ t[7][byte(crc)]
		p = p[8:]
	}
	for _, v := range p {
		crc = t[0][byte(crc)^v] ^ crc>>8
	}
	return ^crc
}
