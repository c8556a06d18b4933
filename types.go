package vrdma

import (
	"fmt"
	"net/netip"
	"strings"
)

// GID is a 128-bit global identifier.
type GID [16]byte

// String formats g as ibv_devinfo does: eight groups of four hex digits.
func (g GID) String() string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

// ParseGID accepts the ibv_devinfo form or any IPv6 / IPv4 address
// (IPv4 maps to ::ffff:a.b.c.d, as RoCEv2 GIDs do).
func ParseGID(s string) (GID, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return GID{}, fmt.Errorf("vrdma: GID %q: %w: use a form like fe80:0000:0000:0000:0000:00ff:fe00:0001 or 192.0.2.1", s, ErrInvalidArgument)
	}
	return GID(a.As16()), nil
}
