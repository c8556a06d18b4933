package uplink

// Multicast groups on the link's interface (docs/design/multicast.md).
// Joining a group on the receive socket puts it in the interface's
// multicast list, so the kernel sends IGMP (IPv4) or MLD (IPv6) reports
// for it on the link and takes the group's datagrams in, as it does for
// the groups rdma_rxe adds to its netdev.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// groups are the multicast groups the engine asked the link to join: the
// readers take datagrams to them as to the interface's own addresses. The
// set is replaced whole on every change; a reader's look-up takes no
// lock. A group stays in the set while its interface is gone, and is
// joined again on the interface that comes back under the name (rejoin).
type groups struct {
	mu  sync.Mutex // held across the changes and their setsockopts
	set atomic.Pointer[groupSet]
	on  int // the ifindex the memberships were made on; 0: none
}

type groupSet struct {
	v4 [][4]byte
	v6 [][16]byte
}

// change adds a to the set or takes it out; g.mu is held.
func (g *groups) change(a netip.Addr, join bool) {
	var n groupSet
	if old := g.set.Load(); old != nil {
		n = groupSet{slices.Clone(old.v4), slices.Clone(old.v6)}
	}
	if a.Is4() {
		n.v4 = slices.DeleteFunc(n.v4, func(x [4]byte) bool { return x == a.As4() })
		if join {
			n.v4 = append(n.v4, a.As4())
		}
	} else {
		n.v6 = slices.DeleteFunc(n.v6, func(x [16]byte) bool { return x == a.As16() })
		if join {
			n.v6 = append(n.v6, a.As16())
		}
	}
	g.set.Store(&n)
}

// has4 reports whether the IPv4 address a (4 bytes) is a joined group.
func (g *groups) has4(a []byte) bool {
	s := g.set.Load()
	if s == nil || a[0]&0xf0 != 0xe0 {
		return false
	}
	for i := range s.v4 {
		x := &s.v4[i]
		if x[0] == a[0] && x[1] == a[1] && x[2] == a[2] && x[3] == a[3] {
			return true
		}
	}
	return false
}

// has6 reports whether the IPv6 address a is a joined group.
func (g *groups) has6(a *[16]byte) bool {
	s := g.set.Load()
	if s == nil || a[0] != 0xff {
		return false
	}
	for i := range s.v6 {
		if s.v6[i] == *a {
			return true
		}
	}
	return false
}

// JoinGroup joins the IP multicast group g on the link's interface.
func (l *Link) JoinGroup(g netip.Addr) error { return l.group(g, true) }

// LeaveGroup leaves the IP multicast group g.
func (l *Link) LeaveGroup(g netip.Addr) error { return l.group(g, false) }

func (l *Link) group(g netip.Addr, join bool) error {
	if !g.IsMulticast() {
		return fmt.Errorf("%w: %s is not a multicast address", ErrConfig, g)
	}
	gs := &l.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.change(g, join) // wanted, whether or not the interface is there now
	ifindex := l.snap.Load().ifindex
	if ifindex == 0 {
		if !join {
			return nil // the membership went with the interface
		}
		return fmt.Errorf("uplink %s: the interface %s is not there: %s joins %s when it comes back", l.cfg.Name, l.cfg.Netdev, l.cfg.Name, g)
	}
	if err := l.membership(g, join, ifindex); err != nil {
		what := "join"
		if !join {
			what = "leave"
		}
		return fmt.Errorf("uplink %s: %s multicast group %s on %s: %w", l.cfg.Name, what, g, l.cfg.Netdev, err)
	}
	gs.on = ifindex
	return nil
}

// rejoin makes the memberships of every group in the set on the interface
// ifindex, which came under the link's name (the watcher calls it when the
// index changes): the old interface's went with it (they are dropped, in
// case they linger on the socket), and the kernel sends the IGMP or MLD
// reports on the new one. A failure is the link's problem to report; the
// groups stay wanted.
func (l *Link) rejoin(ifindex int) error {
	gs := &l.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	set := gs.set.Load()
	if set == nil || gs.on == ifindex {
		return nil
	}
	var all []netip.Addr
	for _, a := range set.v4 {
		all = append(all, netip.AddrFrom4(a))
	}
	for _, a := range set.v6 {
		all = append(all, netip.AddrFrom16(a))
	}
	var first error
	for _, g := range all {
		if gs.on != 0 {
			_ = l.membership(g, false, gs.on)
		}
		if err := l.membership(g, true, ifindex); err != nil && !errors.Is(err, unix.EADDRINUSE) && first == nil {
			first = fmt.Errorf("uplink %s: join multicast group %s again on %s: %w", l.cfg.Name, g, l.cfg.Netdev, err)
		}
	}
	gs.on = ifindex
	return first
}

// membership adds (or drops) the receive socket's membership of g on the
// interface ifindex.
func (l *Link) membership(g netip.Addr, join bool, ifindex int) error {
	r := l.rx6
	if g.Is4() {
		r = l.rx4
	}
	var serr error
	err := r.rc.Control(func(fd uintptr) {
		if g.Is4() {
			m := &unix.IPMreqn{Multiaddr: g.As4(), Ifindex: int32(ifindex)}
			opt := unix.IP_ADD_MEMBERSHIP
			if !join {
				opt = unix.IP_DROP_MEMBERSHIP
			}
			serr = unix.SetsockoptIPMreqn(int(fd), unix.IPPROTO_IP, opt, m)
			return
		}
		m := &unix.IPv6Mreq{Multiaddr: g.As16(), Interface: uint32(ifindex)}
		opt := unix.IPV6_JOIN_GROUP
		if !join {
			opt = unix.IPV6_LEAVE_GROUP
		}
		serr = unix.SetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IPV6, opt, m)
	})
	if err == nil {
		err = serr
	}
	return err
}

// noLoop keeps a send socket's multicast datagrams from coming back to
// this host's own receive sockets: the engine copies a datagram to this
// host's members itself.
func noLoop(fd, family int) error {
	if family == unix.AF_INET {
		return unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 0)
	}
	return unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_LOOP, 0)
}
