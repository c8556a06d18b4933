package verbs

import (
	"encoding/binary"
	"fmt"
)

// The helper's protocol: one message per SOCK_SEQPACKET record, a 16-byte
// header in the host's byte order (the helper runs on the daemon's host)
// and a body whose layout depends on the op (csrc/helper.c).
const (
	// Version is the protocol version the helper's hello carries.
	Version = 4
	// HeaderSize is the size of a message's header.
	HeaderSize = 16
	// MaxMessage is the largest message either side sends.
	MaxMessage = 16384
	// MaxGIDs is the most GID entries one port reply carries.
	MaxGIDs = 256
	// maxName is the longest device name the helper takes.
	maxName = 64

	regMRSize    = 32
	mrSize       = 24
	devAttrSize  = 144
	portAttrSize = 40
	gidEntrySize = 28
)

// Op is a message's operation.
type Op uint16

// Ops. A reply carries its request's op with OpReply set.
const (
	OpHello     Op = 1 // the helper's first message, unasked: u32 version
	OpOpen      Op = 2 // u32 port, u32 name length, name → DeviceAttr
	OpQueryPort Op = 3 // (empty) → PortAttr
	OpPing      Op = 4 // (empty) → (empty): liveness, and the relay's cost
	OpRegMR     Op = 5 // u64 offset, u64 length, u32 access, u32 0, u64 iova, and a memfd → MR
	OpDeregMR   Op = 6 // u32 handle → (empty)
	OpReply     Op = 0x8000
)

var ne = binary.NativeEndian

// Header is a view of a message's header.
type Header []byte

// ParseHeader checks that msg is one whole message: at least a header,
// at most MaxMessage bytes, and as long as its header says.
func ParseHeader(msg []byte) (Header, error) {
	if len(msg) < HeaderSize {
		return nil, protoErrorf("a %d-byte message is shorter than its %d-byte header", len(msg), HeaderSize)
	}
	if len(msg) > MaxMessage {
		return nil, protoErrorf("a %d-byte message is over the %d-byte limit", len(msg), MaxMessage)
	}
	h := Header(msg[:HeaderSize])
	if int(h.Len()) != len(msg) {
		return nil, protoErrorf("a %d-byte message says it is %d bytes", len(msg), h.Len())
	}
	if h.Flags() != 0 {
		return nil, protoErrorf("header flags %#x: none are defined", h.Flags())
	}
	return h, nil
}

// Len is the whole message's length.
func (h Header) Len() uint32 { return ne.Uint32(h[0:]) }

// Op is the message's operation.
func (h Header) Op() Op { return Op(ne.Uint16(h[4:])) }

// Flags are reserved: 0.
func (h Header) Flags() uint16 { return ne.Uint16(h[6:]) }

// Seq pairs a reply with its request.
func (h Header) Seq() uint32 { return ne.Uint32(h[8:]) }

// Status is 0, or the errno of a failed request.
func (h Header) Status() int32 { return int32(ne.Uint32(h[12:])) }

// AppendHeader appends a header for a message with a bodyLen-byte body.
func AppendHeader(dst []byte, op Op, seq uint32, status int32, bodyLen int) []byte {
	dst = ne.AppendUint32(dst, uint32(HeaderSize+bodyLen))
	dst = ne.AppendUint16(dst, uint16(op))
	dst = ne.AppendUint16(dst, 0)
	dst = ne.AppendUint32(dst, seq)
	return ne.AppendUint32(dst, uint32(status))
}

// AppendOpen appends an OpOpen request for port of device name.
func AppendOpen(dst []byte, seq uint32, name string, port uint8) []byte {
	dst = AppendHeader(dst, OpOpen, seq, 0, 8+len(name))
	dst = ne.AppendUint32(dst, uint32(port))
	dst = ne.AppendUint32(dst, uint32(len(name)))
	return append(dst, name...)
}

// Node types and transports, as rdma-core numbers them.
const (
	TransportIB    = 0 // InfiniBand and RoCE
	TransportIWARP = 1
)

// DeviceAttr is what the helper reports of an opened device
// (ibv_query_device and the device's node and transport type).
type DeviceAttr struct {
	NodeGUID, SysImageGUID uint64
	VendorID, VendorPartID uint32
	HWVer                  uint32
	PhysPortCnt            uint32
	MaxQP, MaxQPWR, MaxSGE int32
	MaxCQ, MaxCQE, MaxMR   int32
	MaxMRSize              uint64
	MaxPD                  int32
	AtomicCap              uint32 // 0: none (iWARP, siw)
	NodeType               int32
	Transport              int32 // TransportIB or TransportIWARP
	FWVer                  string
}

// ParseDeviceAttr decodes an OpOpen reply's body.
func ParseDeviceAttr(b []byte) (DeviceAttr, error) {
	if len(b) != devAttrSize {
		return DeviceAttr{}, protoErrorf("device attributes of %d bytes, want %d", len(b), devAttrSize)
	}
	var a DeviceAttr
	a.NodeGUID, a.SysImageGUID = ne.Uint64(b[0:]), ne.Uint64(b[8:])
	a.VendorID, a.VendorPartID, a.HWVer, a.PhysPortCnt = ne.Uint32(b[16:]), ne.Uint32(b[20:]), ne.Uint32(b[24:]), ne.Uint32(b[28:])
	i32 := func(off int) int32 { return int32(ne.Uint32(b[off:])) }
	a.MaxQP, a.MaxQPWR, a.MaxSGE, a.MaxCQ, a.MaxCQE, a.MaxMR = i32(32), i32(36), i32(40), i32(44), i32(48), i32(52)
	a.MaxMRSize = ne.Uint64(b[56:])
	a.MaxPD, a.AtomicCap, a.NodeType, a.Transport = i32(64), ne.Uint32(b[68:]), i32(72), i32(76)
	fw := b[80:144]
	n := 0
	for n < len(fw) && fw[n] != 0 {
		n++
	}
	a.FWVer = printable(fw[:n])
	switch {
	case a.PhysPortCnt == 0 || a.PhysPortCnt > 255:
		return DeviceAttr{}, protoErrorf("device with %d ports", a.PhysPortCnt)
	case a.AtomicCap > AtomicGlobal:
		return DeviceAttr{}, protoErrorf("atomic capability %d is not 0..2", a.AtomicCap)
	case a.Transport < TransportUnknown || a.Transport > TransportUnspecified:
		return DeviceAttr{}, protoErrorf("transport %d is not -1..4", a.Transport)
	case a.MaxQP < 0 || a.MaxQPWR < 0 || a.MaxSGE < 0 || a.MaxCQ < 0 || a.MaxCQE < 0 || a.MaxMR < 0 || a.MaxPD < 0:
		return DeviceAttr{}, protoErrorf("a negative limit (max_qp %d, max_qp_wr %d, max_sge %d, max_cq %d, max_cqe %d, max_mr %d, max_pd %d)",
			a.MaxQP, a.MaxQPWR, a.MaxSGE, a.MaxCQ, a.MaxCQE, a.MaxMR, a.MaxPD)
	}
	return a, nil
}

// AppendDeviceAttr is ParseDeviceAttr's inverse: what the helper sends (fake helpers in tests use it).
func AppendDeviceAttr(dst []byte, a DeviceAttr) []byte {
	dst = ne.AppendUint64(dst, a.NodeGUID)
	dst = ne.AppendUint64(dst, a.SysImageGUID)
	for _, v := range []uint32{a.VendorID, a.VendorPartID, a.HWVer, a.PhysPortCnt,
		uint32(a.MaxQP), uint32(a.MaxQPWR), uint32(a.MaxSGE), uint32(a.MaxCQ), uint32(a.MaxCQE), uint32(a.MaxMR)} {
		dst = ne.AppendUint32(dst, v)
	}
	dst = ne.AppendUint64(dst, a.MaxMRSize)
	for _, v := range []uint32{uint32(a.MaxPD), a.AtomicCap, uint32(a.NodeType), uint32(a.Transport)} {
		dst = ne.AppendUint32(dst, v)
	}
	var fw [64]byte
	copy(fw[:63], a.FWVer)
	return append(dst, fw[:]...)
}

// Link layers, as rdma-core numbers them.
const (
	LinkLayerUnspecified = 0
	LinkLayerInfiniBand  = 1
	LinkLayerEthernet    = 2
)

// GID types, as rdma-core numbers them (enum ibv_gid_type).
const (
	GIDTypeIB     = 0
	GIDTypeRoCEv1 = 1
	GIDTypeRoCEv2 = 2
)

// GIDEntry is one entry of a port's GID table.
type GIDEntry struct {
	Index   uint32
	Type    uint32   // GIDTypeIB, GIDTypeRoCEv1, GIDTypeRoCEv2
	Ifindex uint32   // the netdev the GID belongs to (RoCE), 0 if none
	GID     [16]byte // network order
}

// PortAttr is what the helper reports of the open port (ibv_query_port)
// and its GID table (ibv_query_gid_ex; empty entries left out).
type PortAttr struct {
	State, PhysState  uint32
	MaxMTU, ActiveMTU uint32 // enum ibv_mtu: 1 is 256 bytes ... 5 is 4096
	LinkLayer         uint32
	LID, SMLID        uint32
	GIDTableLen       uint32
	CapFlags          uint32
	GIDs              []GIDEntry
}

// ParsePortAttr decodes an OpQueryPort reply's body.
func ParsePortAttr(b []byte) (PortAttr, error) {
	if len(b) < portAttrSize {
		return PortAttr{}, protoErrorf("port attributes of %d bytes, want at least %d", len(b), portAttrSize)
	}
	var p PortAttr
	u := func(off int) uint32 { return ne.Uint32(b[off:]) }
	p.State, p.PhysState, p.MaxMTU, p.ActiveMTU, p.LinkLayer = u(0), u(4), u(8), u(12), u(16)
	p.LID, p.SMLID, p.GIDTableLen, p.CapFlags = u(20), u(24), u(28), u(32)
	n := u(36)
	switch {
	case n > MaxGIDs:
		return PortAttr{}, protoErrorf("%d GIDs, at most %d", n, MaxGIDs)
	case len(b) != portAttrSize+int(n)*gidEntrySize:
		return PortAttr{}, protoErrorf("%d GIDs in %d bytes, want %d", n, len(b), portAttrSize+int(n)*gidEntrySize)
	case p.MaxMTU > 5 || p.ActiveMTU > 5:
		return PortAttr{}, protoErrorf("MTU code %d/%d is not 1..5 (256..4096 bytes)", p.MaxMTU, p.ActiveMTU)
	case p.LinkLayer > LinkLayerEthernet:
		return PortAttr{}, protoErrorf("link layer %d is not 0..2", p.LinkLayer)
	case p.LID > 0xffff || p.SMLID > 0xffff:
		return PortAttr{}, protoErrorf("LID %#x or SM LID %#x over 16 bits", p.LID, p.SMLID)
	}
	if n > 0 {
		p.GIDs = make([]GIDEntry, n)
	}
	for i := range p.GIDs {
		e := b[portAttrSize+i*gidEntrySize:]
		g := GIDEntry{Index: ne.Uint32(e[0:]), Type: ne.Uint32(e[4:]), Ifindex: ne.Uint32(e[8:])}
		copy(g.GID[:], e[12:28])
		if g.Type > GIDTypeRoCEv2 {
			return PortAttr{}, protoErrorf("GID %d has type %d, not 0..2", g.Index, g.Type)
		}
		if p.GIDTableLen != 0 && g.Index >= p.GIDTableLen {
			return PortAttr{}, protoErrorf("GID index %d beyond the table's %d entries", g.Index, p.GIDTableLen)
		}
		p.GIDs[i] = g
	}
	return p, nil
}

// AppendPortAttr is ParsePortAttr's inverse: what the helper sends (fake helpers in tests use it).
func AppendPortAttr(dst []byte, p PortAttr) []byte {
	for _, v := range []uint32{p.State, p.PhysState, p.MaxMTU, p.ActiveMTU, p.LinkLayer, p.LID, p.SMLID, p.GIDTableLen, p.CapFlags, uint32(len(p.GIDs))} {
		dst = ne.AppendUint32(dst, v)
	}
	for _, g := range p.GIDs {
		dst = ne.AppendUint32(dst, g.Index)
		dst = ne.AppendUint32(dst, g.Type)
		dst = ne.AppendUint32(dst, g.Ifindex)
		dst = append(dst, g.GID[:]...)
	}
	return dst
}

// printable returns b as text with anything but printable ASCII replaced,
// so a helper's text cannot put control characters into logs.
func printable(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		out[i] = c
	}
	return string(out)
}

// protoErrorf is an *Error of kind ErrProtocol.
func protoErrorf(format string, args ...any) error {
	return &Error{Kind: ErrProtocol, Msg: fmt.Sprintf(format, args...)}
}

// Access flags a region may be registered with (enum ibv_access_flags).
const (
	AccessLocalWrite   = 1
	AccessRemoteWrite  = 2
	AccessRemoteRead   = 4
	AccessRemoteAtomic = 8
)

// AppendRegMR appends an OpRegMR request: length bytes at offset (a
// multiple of the page size) of the memfd sent with it, which the device
// knows by the addresses from iova on (the application's, which its peers
// name in RDMA WRITE and READ).
func AppendRegMR(dst []byte, seq uint32, offset, length uint64, access uint32, iova uint64) []byte {
	dst = AppendHeader(dst, OpRegMR, seq, 0, regMRSize)
	dst = ne.AppendUint64(dst, offset)
	dst = ne.AppendUint64(dst, length)
	dst = ne.AppendUint32(dst, access)
	dst = ne.AppendUint32(dst, 0)
	return ne.AppendUint64(dst, iova)
}

// MR is a region registered with the device over the helper's mapping of
// a memfd: the device's keys, the helper's address of its first byte, and
// the address the device knows that byte by (IOVA: what the registration
// asked for; peers name it in RDMA WRITE and READ, and the helper turns a
// work request's handle and offset into it).
type MR struct {
	Handle     uint32
	LKey, RKey uint32
	Addr       uint64
	IOVA       uint64
}

// ParseMR decodes an OpRegMR reply's body.
func ParseMR(b []byte) (MR, error) {
	if len(b) != mrSize {
		return MR{}, protoErrorf("a registered region of %d bytes, want %d", len(b), mrSize)
	}
	m := MR{Handle: ne.Uint32(b[0:]), LKey: ne.Uint32(b[4:]), RKey: ne.Uint32(b[8:]), Addr: ne.Uint64(b[16:])}
	if ne.Uint32(b[12:]) != 0 || m.Addr == 0 {
		return MR{}, protoErrorf("a registered region with padding %#x at address %#x", ne.Uint32(b[12:]), m.Addr)
	}
	return m, nil
}
