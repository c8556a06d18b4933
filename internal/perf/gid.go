package perf

import (
	"net"
	"net/netip"

	"github.com/vrdma/vrdma"
)

// AutoGID as a GID index has each end pick its GID (see pickGID).
const AutoGID = -1

// pickGID returns the index of the GID an end uses when none is given,
// for a control connection whose local address is local: the GID that is
// that address, if the table has it; else the first of its family (an
// IPv4-mapped ::ffff:a.b.c.d for IPv4, any other for IPv6); else 0.
func pickGID(gids []vrdma.GID, local netip.Addr) int {
	local = local.Unmap()
	first := -1
	for i, g := range gids {
		a := netip.AddrFrom16(g)
		if a.Unmap() == local {
			return i
		}
		if first < 0 && a.Is4In6() == local.Is4() {
			first = i
		}
	}
	return max(first, 0)
}

// localIP returns the IP address of conn's local end (the zero Addr if it
// has none).
func localIP(conn net.Conn) netip.Addr {
	if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr()
	}
	return netip.Addr{}
}
