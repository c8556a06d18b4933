package uplink

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
)

// Link is RoCEv2 on one host interface. Its methods are safe for
// concurrent use.
type Link struct {
	cfg  Config
	port uint16

	rx4, rx6 *reader
	tx       *sender
	w        *watcher

	snap   atomic.Pointer[snapshot]
	stats  counters
	groups groups // multicast groups joined (mcast.go)

	// deliverMu keeps the two readers (one per address family) from
	// calling deliver at once: the engine's receiver is single-threaded.
	// Each holds it for one batch.
	deliverMu sync.Mutex

	lastMTU atomic.Uint32 // the last active MTU the interface had

	closeOnce sync.Once
	closed    atomic.Bool
	serving   atomic.Bool
}

// Open opens a link on cfg.Netdev in the calling thread's network
// namespace. It fails with a *NetdevError when the interface does not exist
// (unless cfg.WaitNetdev), a *PortBusyError when the port is taken on one of
// its addresses, ErrPermission without CAP_NET_RAW.
func Open(cfg Config) (*Link, error) {
	if cfg.Netdev == "" {
		return nil, fmt.Errorf("%w: no network interface given", ErrConfig)
	}
	if cfg.DSCP > 63 {
		return nil, fmt.Errorf("%w: DSCP %d is not in 0..63", ErrConfig, cfg.DSCP)
	}
	// The sockets, the netlink subscription and the namespace handle must
	// all come from one thread's network namespace.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	l := &Link{cfg: cfg, port: cfg.port()}
	l.snap.Store(&snapshot{problem: "not opened yet"})
	ok := false
	defer func() {
		if !ok {
			l.release()
		}
	}()
	f4, err := openRx4(l.port)
	if err != nil {
		return nil, err
	}
	if l.rx4, err = newReader(l, f4, false); err != nil {
		f4.Close()
		return nil, err
	}
	f6, err := openRx6(l.port)
	if err != nil {
		return nil, err
	}
	if l.rx6, err = newReader(l, f6, true); err != nil {
		f6.Close()
		return nil, err
	}
	if l.tx, err = newSender(cfg.DSCP); err != nil {
		return nil, err
	}
	if l.w, err = newWatcher(l); err != nil {
		return nil, err
	}
	if cfg.GSO {
		l.tx.gso = newGSOSender(l.w.nsfd, int(cfg.DSCP>>3))
	}
	if err := l.w.sync(); err != nil {
		if !(cfg.WaitNetdev && errors.Is(err, ErrNoNetdev)) {
			return nil, err
		}
	}
	l.w.start()
	ok = true
	return l, nil
}

// release closes whatever Open or Close finds open.
func (l *Link) release() {
	if l.w != nil {
		l.w.stop() // closes the port-holding sockets
	}
	if l.rx4 != nil {
		l.rx4.file.Close()
	}
	if l.rx6 != nil {
		l.rx6.file.Close()
	}
	if l.tx != nil {
		l.tx.close()
	}
}

// Name returns the link's name.
func (l *Link) Name() string { return l.cfg.Name }

// Netdev returns the name of the link's interface.
func (l *Link) Netdev() string { return l.cfg.Netdev }

// DSCP returns the DSCP the engine should write into the link's frames.
func (l *Link) DSCP() uint8 { return l.cfg.DSCP }

// Port returns the UDP port the link listens on.
func (l *Link) Port() uint16 { return l.port }

// GIDs returns the link's current GID table in rxe's order (see GIDTable);
// it is empty while the interface does not exist. The slice is the caller's.
func (l *Link) GIDs() [][16]byte {
	return append([][16]byte(nil), l.snap.Load().gids...)
}

// ActiveMTU returns the largest IB MTU the interface carries: its MTU
// minus 80 bytes of headers, rounded down. While the interface is gone it
// is the last MTU it had (1024 if it never existed).
func (l *Link) ActiveMTU() abi.MTU {
	if m := abi.MTU(l.lastMTU.Load()); m.Valid() {
		return m
	}
	return abi.MTU1024
}

// State returns what the link knows about its interface.
func (l *Link) State() State {
	s := l.snap.Load()
	return State{Active: s.active, Netdev: s.netdev, Problem: s.problem}
}

// Stats returns the link's counters.
func (l *Link) Stats() Stats { return l.stats.snapshot() }

// WriteBatch sends frames, each a whole IPv4 or IPv6 packet (IP header,
// UDP header, BTH ... ICRC) exactly as it is to go on the wire, and
// returns how many were sent. An IPv4 frame must carry a non-zero
// Identification (the kernel would otherwise pick one the ICRC does not
// cover) and its true total length. On an error WriteBatch returns how many
// frames went before the one that failed, which is not sent, nor are those
// after it: a *FrameError for a malformed frame, ErrDown while the
// interface is gone, ErrClosed after Close, or the kernel's error.
func (l *Link) WriteBatch(frames [][]byte) (int, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	s := l.snap.Load()
	if !s.netdev {
		return 0, ErrDown
	}
	return l.tx.write(l, frames, s.ifindex)
}

// Serve receives packets until Close and calls deliver with each packet to
// one of the link's addresses, a whole IPv4 or IPv6 packet from the IP
// header to the ICRC. The slice is valid only during the call. IPv4 packets
// are as they arrived; an IPv6 packet's fixed header is rebuilt from what
// the socket reports, which is every field the ICRC covers plus the
// traffic class, flow label and hop limit (extension headers, which RoCE
// does not use, are not kept). deliver is never called by two goroutines
// at once (each address family has its reader; they take turns, a batch
// at a time) and must not call Close. Serve returns nil once the link is
// closed; it may run only once.
func (l *Link) Serve(deliver func(frame []byte)) error {
	if l.closed.Load() {
		return nil
	}
	if !l.serving.CompareAndSwap(false, true) {
		return ErrServing
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.rx6.run(deliver)
	}()
	l.rx4.run(deliver)
	<-done
	return nil
}

// Close stops Serve (which returns soon after; a deliver call in progress
// finishes first), stops following the interface and closes the sockets.
func (l *Link) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		l.release()
	})
	return nil
}

// setSnapshot publishes what the watcher found.
func (l *Link) setSnapshot(s *snapshot) {
	if s.mtu.Valid() {
		l.lastMTU.Store(uint32(s.mtu))
	}
	l.snap.Store(s)
}
