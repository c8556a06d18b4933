package uplink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// gsoSender sends GSO runs (see segment.go) with one sendmsg each on UDP
// sockets carrying UDP_SEGMENT. A UDP socket fixes its source address,
// source port, TOS or traffic class and TTL or hop limit, so there is a
// socket per combination in use, made on first use and kept (at most
// gsoMaxSockets; past that a new one replaces one of them). Each
// is bound with SO_REUSEADDR and IP_FREEBIND, as the port holders are, and
// drops whatever it receives. A combination whose socket cannot be made
// (the port is another program's) is remembered and its runs go through
// the raw socket frame by frame, as do those of a flow whose GSO send the
// kernel refused (refusedGSO).
//
// The kernel numbers the IPv4 segments of an unconnected DF socket's send
// 0, 1, 2, ... (segmentation in the stack or the driver keeps counting from
// the buffer's ID, which such a socket leaves 0), so each frame's ICRC is
// rewritten for its index before the send and put back after.
//
// Segments leave with a UDP checksum (GSO needs checksum offload), where
// rxe sends 0; receivers, rxe included, accept both, and the ICRC does not
// cover it.
type gsoSender struct {
	nsfd int // the link's network namespace, for making sockets
	prio int // their SO_PRIORITY

	// mu guards the sockets (the map and each one's f) and the interface
	// index, not the send: close and bindTo must not wait for a send that
	// waits for room in a socket buffer, which closing its socket ends.
	mu      sync.Mutex
	ifindex int // the interface the sockets are bound to
	socks   map[gsoKey]*gsoSock
	closed  bool // after close no socket is made

	// One send at a time (the sender's mutex): its arrays.
	hdr   unix.Msghdr
	iovs  [gsoMaxSegs]unix.Iovec
	name4 unix.RawSockaddrInet4
	name6 unix.RawSockaddrInet6
	ctl   [32]byte
	icrcs [gsoMaxSegs]uint32 // the frames' own ICRCs, put back after the send

	n      int
	errno  unix.Errno
	sendFn func(fd uintptr) bool
}

// gsoMaxSockets bounds the UDP send sockets of one link.
const gsoMaxSockets = 256

// gsoKey is what a UDP send socket fixes.
type gsoKey struct {
	v6       bool
	addr     [16]byte
	sport    uint16
	tos, ttl uint8 // IPv4 TOS and TTL, IPv6 traffic class and hop limit
}

// gsoSock is one UDP send socket; f is nil if it could not be made.
type gsoSock struct {
	f       *os.File
	rc      syscall.RawConn
	ifindex int // the interface it is bound to
}

func newGSOSender(nsfd, prio int) *gsoSender {
	g := &gsoSender{nsfd: nsfd, prio: prio, socks: make(map[gsoKey]*gsoSock)}
	g.sendFn = func(fd uintptr) bool {
		n, errno := sendmsg(fd, &g.hdr)
		if errno == unix.EAGAIN {
			return false
		}
		g.n, g.errno = n, errno
		return true
	}
	return g
}

// close closes every socket and makes no more.
func (g *gsoSender) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	g.closeAll()
}

// closeAll closes every socket; g.mu is held.
func (g *gsoSender) closeAll() {
	for k, s := range g.socks {
		if s.f != nil {
			s.f.Close()
		}
		delete(g.socks, k)
	}
}

// evictOne closes one socket (the map's order picks which) to make room:
// past gsoMaxSockets flows each new one costs one socket made and one
// closed, not all of them.
func (g *gsoSender) evictOne() {
	for k, s := range g.socks {
		if s.f != nil {
			s.f.Close()
		}
		delete(g.socks, k)
		return
	}
}

// bindTo makes later sockets send through interface ifindex; the ones made
// for the old index are closed.
func (g *gsoSender) bindTo(ifindex int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closeAll()
	g.ifindex = ifindex
}

// keyOf returns the socket key of frame f (IP header length hl).
func keyOf(f []byte, hl int) gsoKey {
	var k gsoKey
	if hl == 20 {
		copy(k.addr[:4], f[12:16])
		k.tos, k.ttl = f[1], f[8]
	} else {
		k.v6 = true
		copy(k.addr[:], f[8:24])
		k.tos = f[0]<<4 | f[1]>>4
		k.ttl = f[7]
	}
	k.sport = binary.BigEndian.Uint16(f[hl : hl+2])
	return k
}

// sock returns the socket for frame f's flow, making it if need be; nil if
// it cannot be had.
func (g *gsoSender) sock(f []byte, hl int) *gsoSock {
	k := keyOf(f, hl)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	if s, ok := g.socks[k]; ok {
		if s.f == nil {
			return nil
		}
		return s
	}
	if len(g.socks) >= gsoMaxSockets {
		g.evictOne()
	}
	s := &gsoSock{ifindex: g.ifindex}
	if fd, err := g.open(k, g.ifindex); err == nil {
		s.f = os.NewFile(uintptr(fd), "uplink-gso")
		if s.rc, err = s.f.SyscallConn(); err != nil {
			s.f.Close()
			s.f = nil
		}
	}
	g.socks[k] = s
	if s.f == nil {
		return nil
	}
	return s
}

// open makes the UDP socket for k in the link's network namespace, on a
// thread of its own: one that had to enter the namespace is never used
// again (it ends with its goroutine).
func (g *gsoSender) open(k gsoKey, ifindex int) (int, error) {
	fd, err := -1, error(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if inNetns(g.nsfd) {
			defer runtime.UnlockOSThread()
		} else if err = enterNetns(g.nsfd); err != nil {
			return
		}
		fd, err = openGSOSocket(k, ifindex, g.prio)
	}()
	<-done
	return fd, err
}

// openGSOSocket makes a UDP socket that sends from k's address and port
// with k's TOS (traffic class) and TTL (hop limit), DF, no flow label,
// through interface ifindex.
func openGSOSocket(k gsoKey, ifindex, prio int) (int, error) {
	fam := unix.AF_INET
	if k.v6 {
		fam = unix.AF_INET6
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, err
	}
	type opt struct{ level, name, val int }
	opts := []opt{{unix.SOL_SOCKET, unix.SO_REUSEADDR, 1}, {unix.SOL_IP, unix.IP_FREEBIND, 1}}
	if k.v6 {
		opts = append(opts,
			opt{unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1},
			opt{unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO},
			opt{unix.IPPROTO_IPV6, unix.IPV6_AUTOFLOWLABEL, 0},
			opt{unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(k.tos)},
			opt{unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, int(k.ttl)})
	} else {
		opts = append(opts,
			opt{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO},
			opt{unix.IPPROTO_IP, unix.IP_TOS, int(k.tos)},
			opt{unix.IPPROTO_IP, unix.IP_TTL, int(k.ttl)})
	}
	// After IP_TOS, which sets a priority of its own.
	opts = append(opts, opt{unix.SOL_SOCKET, unix.SO_PRIORITY, prio})
	if ifindex > 0 {
		opts = append(opts, opt{unix.SOL_SOCKET, unix.SO_BINDTOIFINDEX, ifindex})
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.name, o.val); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("socket option %d/%d: %w", o.level, o.name, err)
		}
	}
	if err := attachFilter(fd, dropFilter()); err != nil {
		unix.Close(fd)
		return -1, err
	}
	setBuffer(fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF)
	var sa unix.Sockaddr
	if k.v6 {
		s6 := &unix.SockaddrInet6{Port: int(k.sport), Addr: k.addr}
		if needsScope(netip.AddrFrom16(k.addr)) {
			s6.ZoneId = uint32(ifindex)
		}
		sa = s6
	} else {
		sa = &unix.SockaddrInet4{Port: int(k.sport), Addr: [4]byte(k.addr[:4])}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// send sends run, a GSO run of frames with IP header length hl (see
// gsoRun), on socket s as one buffer.
func (g *gsoSender) send(s *gsoSock, run [][]byte, hl int) error {
	f0 := run[0]
	seg := len(f0) - hl - 8
	if hl == 20 {
		setRunIDs(run, g.icrcs[:len(run)])
		defer restoreICRCs(run, g.icrcs[:len(run)])
		g.name4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte(f0[16:20])}
		g.name4.Port = htons(binary.BigEndian.Uint16(f0[22:24]))
		g.setName4()
	} else {
		g.name6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: [16]byte(f0[24:40])}
		g.name6.Port = htons(binary.BigEndian.Uint16(f0[42:44]))
		if needsScope(netip.AddrFrom16(g.name6.Addr)) {
			g.name6.Scope_id = uint32(s.ifindex)
		}
		g.setName6()
	}
	for j, f := range run {
		g.iovs[j].Base = &f[hl+8]
		g.iovs[j].SetLen(len(f) - hl - 8)
	}
	g.hdr.Iov = &g.iovs[0]
	g.hdr.SetIovlen(len(run))
	g.hdr.SetControllen(putSegmentCmsg(g.ctl[:], uint16(seg)))
	g.hdr.Control = &g.ctl[0]
	defer func() {
		for j := range run {
			g.iovs[j].Base = nil
		}
	}()
	for {
		if err := s.rc.Write(g.sendFn); err != nil {
			return ErrClosed
		}
		switch g.errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return os.NewSyscallError("sendmsg", g.errno)
	}
}

// setRunIDs rewrites the ICRC of each IPv4 frame of a GSO run for the
// Identification its segment will carry, its index in the run, and keeps
// the old ICRCs in old. The frames' own ID fields stay.
func setRunIDs(run [][]byte, old []uint32) {
	n0 := len(run[0])
	opFull, opLast := zeroBytesOp(n0-10), uint32(0)
	for j, f := range run {
		op := opFull
		if len(f) != n0 {
			if opLast == 0 {
				opLast = zeroBytesOp(len(f) - 10)
			}
			op = opLast
		}
		t := f[len(f)-4:]
		c := binary.LittleEndian.Uint32(t)
		old[j] = c
		binary.LittleEndian.PutUint32(t, c^icrcIDDelta(op, binary.BigEndian.Uint16(f[4:6])^uint16(j)))
	}
}

// restoreICRCs puts back the ICRCs setRunIDs kept.
func restoreICRCs(run [][]byte, old []uint32) {
	for j, f := range run {
		binary.LittleEndian.PutUint32(f[len(f)-4:], old[j])
	}
}

// refusedGSO reports whether a GSO send failed because the kernel will not
// send GSO buffers on that path (an IPsec route: EIO; a socket or device
// that cannot checksum: EINVAL; EOPNOTSUPP) rather than for a reason the
// raw socket would meet as well.
func refusedGSO(err error) bool {
	return errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)
}

// refuse closes the socket and marks it unusable: its flow's runs go on
// the raw socket from now on (until the interface's index changes or the
// sockets are made again).
func (g *gsoSender) refuse(s *gsoSock) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.f != nil {
		s.f.Close()
		s.f, s.rc = nil, nil
	}
}

// htons turns a port into the byte order of a sockaddr's port field.
func htons(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}
