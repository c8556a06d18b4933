package ibcm

import (
	"encoding/binary"
	"net/netip"
)

// PortSpace is rdma_cm's port space: which protocol's port numbers a
// service ID carries.
type PortSpace uint8

// The port spaces (rdma_cma.h RDMA_PS_*).
const (
	PortSpaceIPoIB PortSpace = 0x02
	PortSpaceIB    PortSpace = 0x3F
	PortSpaceTCP   PortSpace = 0x06
	PortSpaceUDP   PortSpace = 0x11
)

// serviceIDPrefix is the IP CM service IDs' top 40 bits: 0x0000000001.
const serviceIDPrefix = 0x0000000001

// ServiceID returns the IP CM service ID of port in port space ps.
func ServiceID(ps PortSpace, port uint16) uint64 {
	return serviceIDPrefix<<24 | uint64(ps)<<16 | uint64(port)
}

// ParseServiceID splits an IP CM service ID; ok is false for a service ID
// outside the IP CM range.
func ParseServiceID(id uint64) (ps PortSpace, port uint16, ok bool) {
	if id>>24 != serviceIDPrefix {
		return 0, 0, false
	}
	return PortSpace(id >> 16), uint16(id), true
}

// IPHeaderSize is the IP CM header at the front of a REQ's private data
// (rdma_cm's struct cma_hdr).
const IPHeaderSize = 36

// IPHeader is the IP CM header rdma_cm puts in front of the consumer's
// private data in a REQ: the addresses and the source port the connection
// is between.
type IPHeader struct {
	Version  uint8 // major<<4 | minor: 0x00
	SrcPort  uint16
	Src, Dst netip.Addr // both IPv4 or both IPv6
}

// ParseIPHeader decodes the IP CM header at the front of private data p
// and returns the consumer's private data after it.
func ParseIPHeader(p []byte) (IPHeader, []byte, error) {
	if len(p) < IPHeaderSize {
		return IPHeader{}, nil, formatErr("IP CM header", "%d bytes of private data, the header needs %d", len(p), IPHeaderSize)
	}
	h := IPHeader{Version: p[0], SrcPort: binary.BigEndian.Uint16(p[2:4])}
	switch v := p[1] >> 4; v {
	case 4:
		h.Src = netip.AddrFrom4([4]byte(p[16:20]))
		h.Dst = netip.AddrFrom4([4]byte(p[32:36]))
	case 6:
		h.Src = netip.AddrFrom16([16]byte(p[4:20]))
		h.Dst = netip.AddrFrom16([16]byte(p[20:36]))
	default:
		return IPHeader{}, nil, formatErr("IP CM header", "IP version %d, want 4 or 6", v)
	}
	return h, p[IPHeaderSize:], nil
}

// AppendIPHeader appends h's 36 bytes (IPv4 addresses in the last 4 bytes
// of their 16, as rdma_cm writes them).
func AppendIPHeader(dst []byte, h IPHeader) ([]byte, error) {
	n := len(dst)
	dst = append(dst, make([]byte, IPHeaderSize)...)
	b := dst[n:]
	b[0] = h.Version
	binary.BigEndian.PutUint16(b[2:4], h.SrcPort)
	switch {
	case h.Src.Is4() && h.Dst.Is4():
		b[1] = 4 << 4
		s, d := h.Src.As4(), h.Dst.As4()
		copy(b[16:20], s[:])
		copy(b[32:36], d[:])
	case h.Src.Is6() && h.Dst.Is6() && !h.Src.Is4In6() && !h.Dst.Is4In6():
		b[1] = 6 << 4
		s, d := h.Src.As16(), h.Dst.As16()
		copy(b[4:20], s[:])
		copy(b[20:36], d[:])
	default:
		return dst[:n], formatErr("IP CM header", "addresses %v and %v: both IPv4 or both IPv6", h.Src, h.Dst)
	}
	return dst, nil
}
