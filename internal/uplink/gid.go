package uplink

import (
	"net"
	"net/netip"

	"github.com/vrdma/vrdma/internal/abi"
)

// GIDTable returns the GID table rxe would have on an interface with this
// MAC and these addresses: first fe80::/64 with the EUI-64 of mac, then one
// GID per address in order, IPv4 as the IPv4-mapped ::ffff:a.b.c.d and IPv6
// as is. An address that repeats an earlier GID (the EUI-64 link-local
// address, most often) is not listed twice. A MAC that is not 6 bytes long
// (the loopback interface has none) counts as all zeros.
func GIDTable(mac net.HardwareAddr, addrs []netip.Prefix) [][16]byte {
	gids := make([][16]byte, 0, 1+len(addrs))
	gids = append(gids, linkLocalGID(mac))
next:
	for _, p := range addrs {
		a := p.Addr()
		if !a.IsValid() {
			continue
		}
		g := a.Unmap().As16() // As16 maps IPv4 to ::ffff:a.b.c.d
		for _, x := range gids {
			if x == g {
				continue next
			}
		}
		gids = append(gids, g)
	}
	return gids
}

// linkLocalGID is fe80::/64 with the modified EUI-64 of mac (RFC 4291
// appendix A): the universal/local bit flipped and ff:fe in the middle.
func linkLocalGID(mac net.HardwareAddr) [16]byte {
	var m [6]byte
	if len(mac) == 6 {
		copy(m[:], mac)
	}
	return [16]byte{0: 0xfe, 1: 0x80,
		8: m[0] ^ 0x02, 9: m[1], 10: m[2], 11: 0xff, 12: 0xfe, 13: m[3], 14: m[4], 15: m[5]}
}

// rxeHeaderRoom is what rxe keeps free of the interface MTU for the
// headers (rxe_param.h RXE_MAX_HDR_LENGTH).
const rxeHeaderRoom = 80

// ActiveMTUFor returns the active MTU rxe derives from an interface MTU:
// the largest IB MTU (256 to 4096 bytes) not above ifaceMTU − 80, so 1500
// gives 1024 and 9000 gives 4096. It returns 0 when the interface cannot
// carry even 256 bytes (an MTU below 336).
func ActiveMTUFor(ifaceMTU int) abi.MTU {
	return abi.MTUFromBytes(ifaceMTU - rxeHeaderRoom)
}
