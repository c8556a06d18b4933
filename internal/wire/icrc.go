package wire

import (
	"encoding/binary"
	"hash/crc32"
)

// icrcSeed is the CRC-32 of the 8 bytes of 0xff that stand for the masked
// InfiniBand LRH at the start of the ICRC's coverage (rxe seeds its raw
// crc32_le state with the equivalent 0xdebb20e3).
var icrcSeed = crc32.ChecksumIEEE([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

// maxMasked is the longest IP+UDP+BTH prefix ICRC masks: IPv4 with 40 bytes
// of options.
const maxMasked = 60 + udpLen + bthLen

// ICRC computes the invariant CRC of b, a whole IPv4 or IPv6 RoCEv2 packet
// whose last 4 bytes are the ICRC slot (not covered).
//
// It is the IEEE CRC-32 of 8 bytes of 0xff, the IP header, the UDP header,
// the BTH and everything after it up to the slot, with the variant fields
// taken as all ones: IPv4 TOS, TTL and header checksum, IPv6 traffic class,
// flow label and hop limit, the UDP checksum and BTH byte 4 (FECN, BECN and
// reserved bits). The IPv4 header length is taken from IHL; an IPv6 packet
// is assumed to have no extension headers. The packet stores the result
// little-endian (see VerifyICRC and AppendTrailer).
//
// ICRC returns 0 if b is too short to hold the IP, UDP and BTH headers and
// the ICRC slot, or its IP version is neither 4 nor 6. It does not allocate.
func ICRC(b []byte) uint32 {
	hl, err := ipHeaderLen(b)
	if err != nil {
		return 0
	}
	n := hl + udpLen + bthLen
	if len(b) < n+icrcLen {
		return 0
	}
	var m [maxMasked]byte
	copy(m[:], b[:n])
	if b[0]>>4 == 6 {
		m[0] |= 0x0f // traffic class, high nibble
		m[1], m[2], m[3] = 0xff, 0xff, 0xff
		m[7] = 0xff // hop limit
	} else {
		m[1] = 0xff               // TOS
		m[8] = 0xff               // TTL
		m[10], m[11] = 0xff, 0xff // header checksum
	}
	m[hl+6], m[hl+7] = 0xff, 0xff // UDP checksum
	m[hl+udpLen+4] = 0xff         // BTH FECN, BECN, resv6
	crc := crcUpdate(icrcSeed, m[:n])
	return crc32.Update(crc, crc32.IEEETable, b[n:len(b)-icrcLen])
}

// VerifyICRC checks the ICRC stored little-endian in the last 4 bytes of b,
// a whole IPv4 or IPv6 RoCEv2 packet, against ICRC(b). It returns an error
// matching ErrICRC on a mismatch, ErrTruncated or ErrVersion if b cannot
// hold a RoCEv2 packet, and nil otherwise. It does not allocate.
func VerifyICRC(b []byte) error {
	hl, err := ipHeaderLen(b)
	if err != nil {
		return err
	}
	if len(b) < hl+udpLen+bthLen+icrcLen {
		return errICRCShort
	}
	if binary.LittleEndian.Uint32(b[len(b)-icrcLen:]) != ICRC(b) {
		return errICRC
	}
	return nil
}

// ipHeaderLen returns the length of the IP header b starts with: IHL for
// IPv4, 40 for IPv6.
func ipHeaderLen(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, errEmpty
	}
	switch b[0] >> 4 {
	case 4:
		hl := int(b[0]&0x0f) * 4
		if hl < ipv4MinLen {
			return 0, errIPv4IHL
		}
		return hl, nil
	case 6:
		return ipv6Len, nil
	}
	return 0, errIPVersion
}
