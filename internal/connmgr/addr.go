package connmgr

import (
	"net/netip"

	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/engine"
)

// sourceGID picks the GID a connection to dst leaves from: the adapter's
// first GID of dst's kind (IPv4-mapped, link-local or global IPv6), so
// that the packets can route; the first GID if it has none of that kind.
func sourceGID(a *engine.Adapter, dst [16]byte) (uint8, [16]byte) {
	gids := a.GIDs()
	for i, g := range gids {
		if gidKind(g) == gidKind(dst) {
			return uint8(i), g
		}
	}
	return 0, gids[0]
}

// responderGID picks the GID a responder answers from: the one the request
// was sent to, if it is the adapter's, else one of the requester's kind.
func responderGID(a *engine.Adapter, dst, src [16]byte) (uint8, [16]byte) {
	for i, g := range a.GIDs() {
		if g == dst {
			return uint8(i), g
		}
	}
	return sourceGID(a, src)
}

func gidKind(g [16]byte) int {
	a := netip.AddrFrom16(g)
	switch {
	case a.Is4In6():
		return 4
	case a.IsLinkLocalUnicast():
		return 1
	}
	return 6
}

func gidString(g [16]byte) string { return netip.AddrFrom16(g).Unmap().String() }

// clip bounds a REJ's reason text.
func clip(s string) string {
	if len(s) <= cm.MaxRejectText {
		return s
	}
	i := cm.MaxRejectText
	for i > 0 && s[i]&0xC0 == 0x80 { // do not cut a UTF-8 sequence
		i--
	}
	return s[:i]
}
