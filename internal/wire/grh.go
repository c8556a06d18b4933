package wire

// GRHLen is the size of the GRH area at the start of every UD receive buffer.
const GRHLen = 40

// GRHIsIPv4 reports whether AppendGRH writes an IPv4 header for p (in
// the area's last 20 bytes), not an IPv6 one.
func GRHIsIPv4(p *Packet) bool { return is4(p) }

// AppendGRH appends the 40-byte GRH area that rxe writes in front of the
// payload in a UD receive buffer (rxe_resp.c): for IPv4, 20 zero bytes and
// then the packet's 20-byte IPv4 header; for IPv6, the packet's IPv6 header.
// The header is rebuilt from p as AppendHeaders would write it for
// len(p.Payload) bytes of payload (its lengths and IPv4 checksum included),
// which is the received header for a packet Decode filled, unless that
// carried IPv4 options. It allocates only if dst lacks the capacity.
func AppendGRH(dst []byte, p *Packet) []byte {
	n := EncodedLen(p, len(p.Payload))
	if is4(p) {
		dst = append(dst, make([]byte, GRHLen-ipv4MinLen)...)
		return appendIPv4(dst, p, n)
	}
	return appendIPv6(dst, p, n-ipv6Len)
}
