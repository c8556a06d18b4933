package uplink

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// Classic BPF programs (linux/filter.h). A raw IPv4 socket's filter sees the
// packet from its IP header, a raw IPv6 socket's from the transport header.

const (
	bpfRetAll = 0xFFFFFFFF // accept the whole packet
	bpfRetNo  = 0          // drop it
)

// portFilter4 accepts UDP packets to port on a raw IPv4 socket:
//
//	ldxb 4*([0]&0xf)   ; X = IP header length
//	ldh  [x+2]         ; UDP destination port
//	jeq  #port, accept
//	ret  #0
//	ret  #-1
func portFilter4(port uint16) []unix.SockFilter {
	return []unix.SockFilter{
		{Code: unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH, K: 0},
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_IND, K: 2},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: uint32(port)},
		{Code: unix.BPF_RET | unix.BPF_K, K: bpfRetNo},
		{Code: unix.BPF_RET | unix.BPF_K, K: bpfRetAll},
	}
}

// portFilter6 accepts UDP packets to port on a raw IPv6 socket:
//
//	ldh [2]            ; UDP destination port
//	jeq #port, accept
//	ret #0
//	ret #-1
func portFilter6(port uint16) []unix.SockFilter {
	return []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 2},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: uint32(port)},
		{Code: unix.BPF_RET | unix.BPF_K, K: bpfRetNo},
		{Code: unix.BPF_RET | unix.BPF_K, K: bpfRetAll},
	}
}

// dropFilter drops everything: the port-holding sockets queue nothing.
func dropFilter() []unix.SockFilter {
	return []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: bpfRetNo}}
}

func attachFilter(fd int, prog []unix.SockFilter) error {
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp)
}

// socketBuffer is the receive and send buffer of the raw sockets: room for
// a few thousand MTU-sized packets while the reader catches up.
const socketBuffer = 4 << 20

// setBuffer sets a socket buffer, past the sysctl limit when the process
// may (CAP_NET_ADMIN), within it otherwise.
func setBuffer(fd, force, plain int) {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, socketBuffer) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, plain, socketBuffer)
	}
}

// socketErr turns a failed socket(2) into an error that says what to do.
func socketErr(what string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w: %s: %v (run the daemon as root, or give it CAP_NET_RAW)", ErrPermission, what, err)
	}
	return fmt.Errorf("uplink: %s: %w", what, err)
}

// openRx4 opens the raw socket that receives IPv4 packets to port, headers
// included.
func openRx4(port uint16) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, socketErr("raw IPv4 socket", err)
	}
	if err := attachFilter(fd, portFilter4(port)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("uplink: attach the IPv4 port filter: %w", err)
	}
	drain(fd) // what arrived before the filter was attached
	setBuffer(fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF)
	return os.NewFile(uintptr(fd), "uplink-rx4"), nil
}

// openRx6 opens the raw socket that receives IPv6 UDP packets to port, from
// their UDP header, with their addresses, flow information and hop limit
// in control messages.
func openRx6(port uint16) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, socketErr("raw IPv6 socket", err)
	}
	fail := func(what string, err error) (*os.File, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("uplink: %s: %w", what, err)
	}
	if err := attachFilter(fd, portFilter6(port)); err != nil {
		return fail("attach the IPv6 port filter", err)
	}
	for _, opt := range []int{unix.IPV6_RECVPKTINFO, ipv6FlowInfo, unix.IPV6_RECVHOPLIMIT} {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, opt, 1); err != nil {
			return fail(fmt.Sprintf("IPv6 socket option %d", opt), err)
		}
	}
	drain(fd)
	setBuffer(fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF)
	return os.NewFile(uintptr(fd), "uplink-rx6"), nil
}

// openTx opens a send-only raw socket whose packets carry their own IP
// header: IPPROTO_RAW implies IP_HDRINCL for IPv4 and IPV6_HDRINCL for
// IPv6. The kernel fills in an IPv4 packet's checksum and total length (the
// frame's own, when they are right) and its Identification when that is 0;
// it leaves an IPv6 header as it is.
func openTx(family, priority int) (*os.File, error) {
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return nil, socketErr("raw send socket", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PRIORITY, priority); err != nil {
		unix.Close(fd)
		return nil, socketErr("socket priority", err)
	}
	if err := noLoop(fd, family); err != nil {
		unix.Close(fd)
		return nil, socketErr("multicast loop off", err)
	}
	setBuffer(fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF)
	return os.NewFile(uintptr(fd), "uplink-tx"), nil
}

// drain discards what a nonblocking socket holds.
func drain(fd int) {
	var b [1]byte
	for {
		if _, _, err := unix.Recvfrom(fd, b[:], unix.MSG_TRUNC); err != nil {
			return
		}
	}
}

// holdPort binds a UDP socket to addr:port so that the port is the link's
// on that address and the kernel sends no ICMP port-unreachable for it. Its
// filter drops every packet: the raw sockets have their copy already.
// IP_FREEBIND lets it bind an address that is still tentative (IPv6
// duplicate address detection) or just going away. With gro it takes GSO
// buffers whole (UDP_GRO), so that one arriving whole (over a veth pair) is
// dropped at once rather than cut up first.
func holdPort(addr netip.Addr, ifindex int, port uint16, gro bool) (int, error) {
	family := unix.AF_INET
	if addr.Is6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("uplink: UDP socket for %v: %w", addr, err)
	}
	fail := func(err error) (int, error) {
		unix.Close(fd)
		if errors.Is(err, unix.EADDRINUSE) {
			return -1, &PortBusyError{Addr: addr, Port: port}
		}
		return -1, fmt.Errorf("uplink: hold UDP port %d on %v: %w", port, addr, err)
	}
	if err := attachFilter(fd, dropFilter()); err != nil {
		return fail(err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_FREEBIND, 1); err != nil {
		return fail(err)
	}
	if gro {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1); err != nil {
			return fail(err)
		}
	}
	var sa unix.Sockaddr
	if addr.Is4() {
		sa = &unix.SockaddrInet4{Port: int(port), Addr: addr.As4()}
	} else {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return fail(err)
		}
		// rxe sends UDP checksum 0; without this the kernel counts each
		// such packet as a checksum error before the filter drops it.
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1); err != nil {
			return fail(err)
		}
		s6 := &unix.SockaddrInet6{Port: int(port), Addr: addr.As16()}
		if needsScope(addr) {
			s6.ZoneId = uint32(ifindex)
		}
		sa = s6
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail(err)
	}
	return fd, nil
}

// needsScope reports whether an IPv6 address means something only on one
// interface.
func needsScope(a netip.Addr) bool {
	return a.Is6() && (a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast())
}
