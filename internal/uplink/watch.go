package uplink

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// watcher follows the link's interface: its addresses (the GID table and
// the port-holding sockets), MTU, state and index. It runs on a thread of
// its own in the network namespace the link was opened in, woken by
// rtnetlink notifications and every few seconds in case one was lost.
type watcher struct {
	l    *Link
	nsfd int // the link's network namespace
	wake int // eventfd: stop

	// Owned by sync, which runs in Open and then only on the watcher's
	// thread.
	holders map[netip.Addr]int // port-holding UDP sockets by address
	boundTo int                // the ifindex the send sockets are bound to

	done chan struct{} // closed when the goroutine has ended; nil if never started
}

// resync is how often the watcher looks even without a notification; with
// no netlink subscription it is resyncPoll.
const (
	resync     = 5 * time.Second
	resyncPoll = time.Second
)

func newWatcher(l *Link) (*watcher, error) {
	nsfd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("uplink: open the network namespace: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(nsfd)
		return nil, fmt.Errorf("uplink: eventfd: %w", err)
	}
	return &watcher{l: l, nsfd: nsfd, wake: wake, holders: make(map[netip.Addr]int)}, nil
}

func (w *watcher) start() {
	w.done = make(chan struct{})
	go w.run()
}

// stop ends the goroutine, if it runs, and closes everything the watcher
// holds.
func (w *watcher) stop() {
	if w.done != nil {
		var one = [8]byte{1}
		_, _ = unix.Write(w.wake, one[:])
		<-w.done
	}
	for a, fd := range w.holders {
		unix.Close(fd)
		delete(w.holders, a)
	}
	unix.Close(w.wake)
	unix.Close(w.nsfd)
}

func (w *watcher) run() {
	defer close(w.done)
	// The thread stays locked: if it had to enter the link's namespace it
	// must not serve other goroutines, and it ends with this one.
	runtime.LockOSThread()
	if err := enterNetns(w.nsfd); err != nil {
		w.problem(fmt.Sprintf("cannot follow the interface: %v", err))
		for !w.waitEvent(-1) {
		}
		return
	}
	nl, err := subscribe()
	if err != nil {
		w.problem(fmt.Sprintf("no address notifications (%v): polling every %v", err, resyncPoll))
		nl = -1
	} else {
		defer unix.Close(nl)
	}
	buf := make([]byte, 1<<16)
	for {
		if w.waitEvent(nl) {
			return
		}
		if nl >= 0 {
			for { // read every notification; one sync covers them all
				if _, _, err := unix.Recvfrom(nl, buf, 0); err != nil && !errors.Is(err, unix.ENOBUFS) {
					break
				}
			}
		}
		_ = w.sync()
	}
}

// waitEvent waits for a notification or the resync period; it reports
// whether the watcher must stop.
func (w *watcher) waitEvent(nl int) bool {
	fds := []unix.PollFd{{Fd: int32(w.wake), Events: unix.POLLIN}, {Fd: int32(nl), Events: unix.POLLIN}}
	timeout := resync
	if nl < 0 {
		fds, timeout = fds[:1], resyncPoll
	}
	_, err := unix.Poll(fds, int(timeout/time.Millisecond))
	if err != nil && !errors.Is(err, unix.EINTR) {
		time.Sleep(resyncPoll)
	}
	return fds[0].Revents != 0
}

func (w *watcher) problem(p string) {
	s := *w.l.snap.Load()
	s.problem = p
	w.l.setSnapshot(&s)
}

// enterNetns moves the calling (locked) thread into the namespace nsfd
// names, unless it is there already.
func enterNetns(nsfd int) error {
	if inNetns(nsfd) {
		return nil
	}
	return unix.Setns(nsfd, unix.CLONE_NEWNET)
}

// inNetns reports whether the calling (locked) thread is in the network
// namespace nsfd names.
func inNetns(nsfd int) bool {
	var want, have unix.Stat_t
	if unix.Fstat(nsfd, &want) != nil || unix.Stat("/proc/thread-self/ns/net", &have) != nil {
		return false
	}
	return want.Dev == have.Dev && want.Ino == have.Ino
}

// subscribe opens an rtnetlink socket that hears of link and address
// changes.
func subscribe() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, err
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK,
		Groups: unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// sync reads the interface and brings the snapshot, the port-holding
// sockets and the send sockets' binding in line with it. It returns a
// *NetdevError when the interface does not exist and the first error
// holding the port, which it also records as the link's problem.
func (w *watcher) sync() error {
	l := w.l
	ifi, err := net.InterfaceByName(l.cfg.Netdev)
	if err != nil {
		nerr := netdevError(l.cfg.Netdev, err)
		if !errors.Is(nerr, ErrNoNetdev) {
			w.problem(nerr.Error())
			return nerr
		}
		w.closeHolders(nil)
		w.boundTo = 0
		l.setSnapshot(&snapshot{problem: nerr.Error()})
		return nerr
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		w.problem(fmt.Sprintf("cannot read the addresses of %s: %v", ifi.Name, err))
		return nil
	}
	s := &snapshot{netdev: true, ifindex: ifi.Index, mtu: ActiveMTUFor(ifi.MTU),
		active: ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagRunning != 0}
	var prefixes []netip.Prefix
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		ones, _ := ipn.Mask.Size()
		prefixes = append(prefixes, netip.PrefixFrom(ip, ones))
		if ip.Is4() {
			s.v4 = append(s.v4, ip.As4())
		} else {
			s.v6 = append(s.v6, ip.As16())
		}
	}
	s.gids = GIDTable(ifi.HardwareAddr, prefixes)
	if ifi.Index != w.boundTo {
		// A new interface under the old name: every socket tied to the
		// old index must be made again.
		w.closeHolders(nil)
		if err := l.tx.bindTo(ifi.Index); err != nil {
			s.problem = fmt.Sprintf("cannot bind the send sockets to %s: %v", ifi.Name, err)
		} else {
			w.boundTo = ifi.Index
		}
	}
	want := make(map[netip.Addr]bool, len(prefixes))
	for _, p := range prefixes {
		want[p.Addr()] = true
	}
	w.closeHolders(want)
	var first error
	for _, p := range prefixes {
		a := p.Addr()
		if _, ok := w.holders[a]; ok {
			continue
		}
		fd, err := holdPort(a, ifi.Index, l.port, l.cfg.GSO)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		w.holders[a] = fd
	}
	switch {
	case first != nil:
		s.problem = first.Error()
	case s.problem != "":
	case !s.active:
		s.problem = fmt.Sprintf("%s is down or has no carrier", ifi.Name)
	}
	l.setSnapshot(s)
	// The groups follow the interface (mcast.go): joined again on a new
	// one under the name, after the snapshot gives joins its index.
	if err := l.rejoin(ifi.Index); err != nil {
		w.problem(err.Error())
	}
	return first
}

// closeHolders closes the port-holding sockets of addresses not in keep.
func (w *watcher) closeHolders(keep map[netip.Addr]bool) {
	for a, fd := range w.holders {
		if !keep[a] {
			unix.Close(fd)
			delete(w.holders, a)
		}
	}
}

// netdevError explains why the interface could not be read: a
// *NetdevError listing the interfaces there are when it does not exist.
func netdevError(name string, err error) error {
	ifs, lerr := net.Interfaces()
	if lerr != nil {
		return fmt.Errorf("uplink: network interface %s: %w", name, err)
	}
	e := &NetdevError{Name: name}
	for _, i := range ifs {
		if i.Name == name { // it exists: reading it failed for another reason
			return fmt.Errorf("uplink: network interface %s: %w", name, err)
		}
		e.Have = append(e.Have, i.Name)
	}
	return e
}
