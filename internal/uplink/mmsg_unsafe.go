package uplink

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds everything that needs package unsafe: the mmsghdr
// arrays of recvmmsg and sendmmsg (x/sys/unix wraps neither on Linux) and
// the walk over received control messages.

// mmsghdr is struct mmsghdr: a msghdr and the byte count the kernel
// returns for it. Go pads it to the C layout (64 bytes on 64-bit Linux).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// batchSize is how many packets one recvmmsg or sendmmsg moves at most.
const batchSize = 64

// msgBatch is a reusable array of message headers with the addresses and
// control buffers they point to. Each field is allocated once.
type msgBatch struct {
	msgs   [batchSize]mmsghdr
	iovs   [batchSize]unix.Iovec
	names4 [batchSize]unix.RawSockaddrInet4
	names6 [batchSize]unix.RawSockaddrInet6
	ctl    [batchSize][ctlSize]byte
}

// ctlSize holds the control messages an IPv6 reader asks for: packet info
// (20 bytes of data), flow info and hop limit (4 each), each with its
// header and padding.
const ctlSize = 128

// setBuf points message i's one iovec at b.
func (m *msgBatch) setBuf(i int, b []byte) {
	m.iovs[i].Base = &b[0]
	m.iovs[i].SetLen(len(b))
	m.msgs[i].hdr.Iov = &m.iovs[i]
	m.msgs[i].hdr.SetIovlen(1)
}

// clearBufs forgets the buffers of messages [0, n) so that a batch does not
// keep a caller's frames alive.
func (m *msgBatch) clearBufs(n int) {
	for i := 0; i < n; i++ {
		m.iovs[i].Base = nil
	}
}

// setName4 makes message i go to (or come from) names4[i].
func (m *msgBatch) setName4(i int) {
	m.msgs[i].hdr.Name = (*byte)(unsafe.Pointer(&m.names4[i]))
	m.msgs[i].hdr.Namelen = unix.SizeofSockaddrInet4
}

// setName6 makes message i go to (or come from) names6[i].
func (m *msgBatch) setName6(i int) {
	m.msgs[i].hdr.Name = (*byte)(unsafe.Pointer(&m.names6[i]))
	m.msgs[i].hdr.Namelen = unix.SizeofSockaddrInet6
}

// setCtl gives message i its control buffer.
func (m *msgBatch) setCtl(i int) {
	m.msgs[i].hdr.Control = &m.ctl[i][0]
	m.msgs[i].hdr.SetControllen(ctlSize)
}

// recvmmsg reads up to len(msgs) datagrams. It returns the errno rather
// than an error so that the hot path converts nothing.
func recvmmsg(fd uintptr, msgs []mmsghdr) (int, unix.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// sendmmsg sends up to len(msgs) datagrams and returns how many went.
func sendmmsg(fd uintptr, msgs []mmsghdr) (int, unix.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// rxInfo6 is what the control messages of one IPv6 datagram say.
type rxInfo6 struct {
	dst      [16]byte
	ifindex  uint32
	flowinfo [4]byte // the header's first word without the version: traffic class and flow label
	hopLimit uint8
	has      uint8 // which of the above came: hasPktinfo | hasFlowinfo | hasHopLimit
}

const (
	hasPktinfo = 1 << iota
	hasFlowinfo
	hasHopLimit
)

// ipv6FlowInfo is IPV6_FLOWINFO (linux/in6.h), which x/sys/unix lacks: as
// a socket option it asks for the flow information of received packets, as
// a control message it carries it.
const ipv6FlowInfo = 11

// parseCmsgs6 reads the IPv6 control messages in b without allocating.
func parseCmsgs6(b []byte, info *rxInfo6) {
	info.has = 0
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(b) {
			return
		}
		data := b[unix.SizeofCmsghdr:l]
		if h.Level == unix.IPPROTO_IPV6 {
			switch {
			case h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
				copy(info.dst[:], data[:16])
				info.ifindex = binary.NativeEndian.Uint32(data[16:20])
				info.has |= hasPktinfo
			case h.Type == ipv6FlowInfo && len(data) >= 4:
				copy(info.flowinfo[:], data[:4])
				info.has |= hasFlowinfo
			case h.Type == unix.IPV6_HOPLIMIT && len(data) >= 4:
				info.hopLimit = uint8(binary.NativeEndian.Uint32(data[:4]))
				info.has |= hasHopLimit
			}
		}
		next := (l + unix.SizeofPtr - 1) &^ (unix.SizeofPtr - 1)
		if next >= len(b) {
			return
		}
		b = b[next:]
	}
}

// sendmsg sends one message.
func sendmsg(fd uintptr, hdr *unix.Msghdr) (int, unix.Errno) {
	n, _, e := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(hdr)), 0)
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// setName4 makes the GSO send go to name4.
func (g *gsoSender) setName4() {
	g.hdr.Name = (*byte)(unsafe.Pointer(&g.name4))
	g.hdr.Namelen = unix.SizeofSockaddrInet4
}

// setName6 makes the GSO send go to name6.
func (g *gsoSender) setName6() {
	g.hdr.Name = (*byte)(unsafe.Pointer(&g.name6))
	g.hdr.Namelen = unix.SizeofSockaddrInet6
}

// putSegmentCmsg writes a UDP_SEGMENT control message with segment size
// seg into b and returns its length.
func putSegmentCmsg(b []byte, seg uint16) int {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level = unix.SOL_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], seg)
	return unix.CmsgSpace(2)
}
