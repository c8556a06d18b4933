package pcap

import "encoding/binary"

// EtherTypes IPPayloadOfFrame knows.
const (
	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86dd
	etherTypeVLAN  = 0x8100 // 802.1Q
	etherTypeQinQ  = 0x88a8 // 802.1ad
	ethHeaderLen   = 14
	vlanTagLen     = 4
	sllHeaderLen   = 16
	sllProtocolOff = 14
)

// IPPayloadOfFrame returns the IPv4 or IPv6 packet inside frame, a record
// of the given link type, and whether there is one. It strips an Ethernet
// header (with at most one 802.1Q or 802.1ad tag) or a Linux cooked (SLL)
// header, or takes a raw-IP frame as it is. If the IP header's length field
// says the packet is shorter than what follows the link-layer header
// (Ethernet pads frames to 60 bytes), the result is cut to that length; it
// is returned uncut if the length field is larger or the header is short,
// for the IP decoder to reject. The result aliases frame.
func IPPayloadOfFrame(linkType int, frame []byte) ([]byte, bool) {
	var b []byte
	var et uint16
	switch linkType {
	case LinkTypeEthernet:
		if len(frame) < ethHeaderLen {
			return nil, false
		}
		et, b = binary.BigEndian.Uint16(frame[12:]), frame[ethHeaderLen:]
		if et == etherTypeVLAN || et == etherTypeQinQ {
			if len(b) < vlanTagLen {
				return nil, false
			}
			et, b = binary.BigEndian.Uint16(b[2:]), b[vlanTagLen:]
		}
	case LinkTypeLinuxSLL:
		if len(frame) < sllHeaderLen {
			return nil, false
		}
		et, b = binary.BigEndian.Uint16(frame[sllProtocolOff:]), frame[sllHeaderLen:]
	case LinkTypeRaw, LinkTypeIPv4, LinkTypeIPv6:
		if len(frame) == 0 {
			return nil, false
		}
		b = frame
		switch frame[0] >> 4 {
		case 4:
			et = etherTypeIPv4
		case 6:
			et = etherTypeIPv6
		}
	default:
		return nil, false
	}
	switch et {
	case etherTypeIPv4:
		if len(b) == 0 || b[0]>>4 != 4 {
			return nil, false
		}
		if len(b) >= 20 {
			if n := int(binary.BigEndian.Uint16(b[2:])); n >= 20 && n < len(b) {
				b = b[:n]
			}
		}
	case etherTypeIPv6:
		if len(b) == 0 || b[0]>>4 != 6 {
			return nil, false
		}
		if len(b) >= 40 {
			if n := 40 + int(binary.BigEndian.Uint16(b[4:])); n < len(b) {
				b = b[:n]
			}
		}
	default:
		return nil, false
	}
	return b, true
}
