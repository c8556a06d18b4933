package tcplink

// The channel's wire format. After TCP (and TLS) connect, each side sends a
// hello at once, without waiting for the other's:
//
//	offset size
//	 0      4   magic "vRtc"
//	 4      1   version (1)
//	 5      1   flags (0; a version 1 peer rejects others)
//	 6      2   n, the number of GIDs that follow (1..64), big-endian
//	 8     16   link ID: random, chosen when the link opens
//	24      8   nonce: random, chosen per connection
//	32   16×n   the sender's GIDs (IPv4 as ::ffff:a.b.c.d)
//
// then frames, each a 4-byte big-endian length and that many bytes: one
// whole IPv4 or IPv6 packet as package wire encodes it, from the IP header
// to the ICRC, or a multicast datagram with its tenant in front (a group
// tag, package wire: its first byte 0x01, then the tenant's length and
// the tenant, then the whole IP packet to the group). Length 0 is a
// keepalive; a length above MaxFrame, or bytes that are neither, is a
// protocol error that closes the connection. (A daemon from before group
// tags closes the connection on a tagged frame: every host of a switch
// must run one that has them.)

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/vrdma/vrdma/internal/wire"
)

const (
	// Version is the channel protocol version this package speaks.
	Version = 1
	// MaxFrame is the largest frame the channel carries: a 9000-byte
	// jumbo packet plus room. The engine's frames (an IB MTU of at most
	// 4096 bytes plus headers) are far below it.
	MaxFrame = 9216
	// frameHeaderLen is the length prefix of a frame.
	frameHeaderLen = 4

	helloMagic    = "vRtc"
	helloFixedLen = 32
	maxHelloAddrs = 64
)

// hello is what each side says first.
type hello struct {
	id    [16]byte
	nonce uint64
	gids  [][16]byte
}

// appendHello appends h in the wire format.
func appendHello(b []byte, h *hello) []byte {
	b = append(b, helloMagic...)
	b = append(b, Version, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.gids)))
	b = append(b, h.id[:]...)
	b = binary.BigEndian.AppendUint64(b, h.nonce)
	for _, g := range h.gids {
		b = append(b, g[:]...)
	}
	return b
}

// parseHelloFixed checks the fixed part of a hello (helloFixedLen bytes)
// and returns how many GIDs follow it. A hello this side does not accept
// gives a *ProtocolError or a *VersionError, without the remote address.
func parseHelloFixed(b []byte, h *hello) (int, error) {
	if err := helloPrefixErr(b[:6]); err != nil {
		return 0, err
	}
	n := int(binary.BigEndian.Uint16(b[6:8]))
	if n == 0 || n > maxHelloAddrs {
		return 0, &ProtocolError{Stage: "hello", Reason: fmt.Sprintf("hello announces %d GIDs, want 1..%d", n, maxHelloAddrs)}
	}
	copy(h.id[:], b[8:24])
	h.nonce = binary.BigEndian.Uint64(b[24:32])
	return n, nil
}

// helloPrefixErr judges the first bytes of a hello, as many as b holds of
// the magic, the version and the flags.
func helloPrefixErr(b []byte) error {
	switch {
	case len(b) >= 4 && string(b[:4]) != helloMagic:
		return &ProtocolError{Stage: "hello", Reason: fmt.Sprintf("not a vrdma TCP-channel hello (it starts %q, want %q)%s", b[:4], helloMagic, magicHint(b))}
	case len(b) >= 5 && b[4] != Version:
		return &VersionError{Got: b[4]}
	case len(b) >= 6 && b[5] != 0:
		return &ProtocolError{Stage: "hello", Reason: fmt.Sprintf("hello flags %#02x are not 0", b[5])}
	}
	return nil
}

// parseHelloGIDs reads the GIDs of a hello.
func parseHelloGIDs(b []byte, h *hello) {
	h.gids = make([][16]byte, len(b)/16)
	for i := range h.gids {
		copy(h.gids[i][:], b[16*i:])
	}
}

// magicHint names what a wrong first few bytes most likely are.
func magicHint(b []byte) string {
	switch {
	case b[0] == 0x16 && b[1] == 0x03:
		return ": it is a TLS handshake, so the peer uses TLS and this link does not: configure TLS on both ends or neither"
	case string(b[:4]) == "GET " || string(b[:4]) == "POST" || string(b[:4]) == "HTTP":
		return ": it is HTTP: something other than a vrdma daemon is at the other end"
	}
	return ""
}

// frameDst checks that f is one whole IPv4 or IPv6 packet, or a group
// tag and one to a multicast group, and returns its destination, or why it
// is not.
func frameDst(f []byte) (netip.Addr, string) {
	if len(f) == 0 {
		return netip.Addr{}, "empty"
	}
	if len(f) > MaxFrame {
		return netip.Addr{}, fmt.Sprintf("%d bytes long, more than %d", len(f), MaxFrame)
	}
	if wire.IsGroupTagged(f) {
		_, d, err := wire.SplitGroupTag(f)
		if err != nil {
			return netip.Addr{}, err.Error()
		}
		if len(d) == 0 {
			return netip.Addr{}, "a group tag with no datagram after it"
		}
		a, why := packetDst(d)
		if why == "" && !a.IsMulticast() {
			return netip.Addr{}, fmt.Sprintf("a group-tagged datagram to %s, which is no multicast group", a)
		}
		return a, why
	}
	return packetDst(f)
}

// packetDst checks that f, not empty, is one whole IPv4 or IPv6 packet and
// returns its destination, or why it is not.
func packetDst(f []byte) (netip.Addr, string) {
	switch f[0] >> 4 {
	case 4:
		ihl := int(f[0]&0x0f) * 4
		switch {
		case len(f) < 20 || ihl < 20 || ihl > len(f):
			return netip.Addr{}, "IPv4 header cut short"
		case int(binary.BigEndian.Uint16(f[2:4])) != len(f):
			return netip.Addr{}, fmt.Sprintf("IPv4 total length %d is not the frame's length %d", binary.BigEndian.Uint16(f[2:4]), len(f))
		}
		return netip.AddrFrom4([4]byte(f[16:20])), ""
	case 6:
		switch {
		case len(f) < 40:
			return netip.Addr{}, "IPv6 header cut short"
		case 40+int(binary.BigEndian.Uint16(f[4:6])) != len(f):
			return netip.Addr{}, fmt.Sprintf("IPv6 payload length %d is not the frame's length less 40 (%d)", binary.BigEndian.Uint16(f[4:6]), len(f)-40)
		}
		return netip.AddrFrom16([16]byte(f[24:40])).Unmap(), ""
	}
	return netip.Addr{}, fmt.Sprintf("not an IPv4 or IPv6 packet (IP version %d)", f[0]>>4)
}
