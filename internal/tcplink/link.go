package tcplink

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/uplink"
)

// acceptRetry is the pause after a failed accept.
const acceptRetry = 50 * time.Millisecond

// Link is the TCP channel of one host daemon: engine.Link over TCP
// connections to the other daemons, one per peer. Its methods are safe for
// concurrent use.
type Link struct {
	cfg    Config
	log    *slog.Logger
	gids   [][16]byte
	id     [16]byte // this link's identity in hellos
	minGID [16]byte // with id, its rank in the tie-break
	ln     net.Listener
	srvTLS *tls.Config
	cliTLS *tls.Config // Config.TLS with fixed 16 KiB records
	dialer net.Dialer
	local  netip.Addr      // the address Listen names, if one: outgoing connections come from it
	ctx    context.Context // ends at Close: aborts dials
	cancel context.CancelFunc

	mu      sync.RWMutex // guards the tables; taken before any peer's mu
	byAddr  map[netip.Addr]*peer
	byEP    map[epKey]*peer
	byIdent map[string]*peer
	peers   []*peer
	conns   map[*conn]struct{} // every open connection, handshaking or not
	closed  bool
	noEP    map[netip.Addr]struct{} // addresses whose lack of endpoint was logged

	isClosed  atomic.Bool
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup // every goroutine of the link

	// gate bounds the incoming connections in their handshake; refuseLog
	// and churnLog bound the log lines about refused connections and
	// about connections coming and going.
	gate                *admit.Gate
	refuseLog, churnLog admit.LogLimit

	// rxMu makes the readers of all connections take turns calling
	// deliver: the engine's receiver is single-threaded.
	rxMu     sync.Mutex
	deliver  func(frame []byte)
	serving  chan struct{} // closed when Serve starts
	serveRun atomic.Bool

	stats counters
}

// Open validates cfg, listens on cfg.Listen and returns the link. It
// dials nobody yet: a peer is dialled when the first frame for it comes.
func Open(cfg Config) (*Link, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	l := &Link{
		cfg:     cfg,
		log:     cfg.Logger.With("link", cfg.Name),
		gids:    gidTable(cfg.MAC, cfg.Addrs),
		byAddr:  make(map[netip.Addr]*peer),
		byEP:    make(map[epKey]*peer),
		byIdent: make(map[string]*peer),
		conns:   make(map[*conn]struct{}),
		noEP:    make(map[netip.Addr]struct{}),
		done:    make(chan struct{}),
		serving: make(chan struct{}),
		gate:    admit.NewGate(cfg.Handshakes),
	}
	if _, err := rand.Read(l.id[:]); err != nil {
		return nil, err
	}
	l.minGID = minGID(l.gids)
	ka := net.KeepAliveConfig{Enable: true, Idle: cfg.KeepAlive, Interval: cfg.KeepAlive, Count: DeadAfter}
	l.dialer = net.Dialer{KeepAliveConfig: ka}
	if cfg.TLS != nil {
		// Records are written many at a time (seal.go): TLS's small first
		// records, which help a browser's first paint, only add records.
		l.cliTLS = cfg.TLS.Clone()
		l.cliTLS.DynamicRecordSizingDisabled = true
		l.srvTLS = admit.ServerTLS(l.cliTLS)
	}
	lc := net.ListenConfig{KeepAliveConfig: ka}
	ln, err := lc.Listen(context.Background(), "tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("tcplink: link %s cannot listen on %s: %w (pick another address or port with Listen; `ss -tlnp` shows who has it)", cfg.Name, cfg.Listen, err)
	}
	l.ln = ln
	if a, err := netip.ParseAddr(hostOf(cfg.Listen)); err == nil && !a.IsUnspecified() {
		l.local = a.Unmap()
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// gidTable is rxe's GID table for the MAC and addresses: the fe80::
// EUI-64 GID of mac if there is one, then one GID per address.
func gidTable(mac net.HardwareAddr, addrs []netip.Addr) [][16]byte {
	var gids [][16]byte
	if len(mac) == 6 {
		gids = uplink.GIDTable(mac, nil)
	}
	for _, a := range addrs {
		if g := a.Unmap().As16(); !slices.Contains(gids, g) {
			gids = append(gids, g)
		}
	}
	return gids
}

// Name returns the link's name.
func (l *Link) Name() string { return l.cfg.Name }

// GIDs returns the link's GID table (see Config.Addrs); the slice is the
// caller's.
func (l *Link) GIDs() [][16]byte { return slices.Clone(l.gids) }

// ActiveMTU returns Config.MTU (4096 unless set).
func (l *Link) ActiveMTU() abi.MTU { return l.cfg.MTU }

// FramesIntact reports whether the link vouches for the frames it
// delivers (engine.IntactLink): with TLS, whose AEAD authenticates every
// byte between the two daemons, it does, and the engine skips the ICRC
// check; over plain TCP, whose 16-bit checksum is weaker than the ICRC,
// it does not.
func (l *Link) FramesIntact() bool { return l.cfg.TLS != nil }

// PathKind tells the engine that packets on this link take the tcp path.
func (l *Link) PathKind() string { return "tcp" }

// ListenAddr returns the address the link accepts connections on.
func (l *Link) ListenAddr() net.Addr { return l.ln.Addr() }

// Stats returns the link's counters.
func (l *Link) Stats() Stats {
	s := l.stats.snapshot()
	g := l.gate.Stats()
	s.HandshakesRefused, s.HandshakesCut = g.Refused, g.Cut
	s.LogsSuppressed = l.refuseLog.Suppressed() + l.churnLog.Suppressed()
	return s
}

// Serve delivers the frames of every connection until Close: deliver is
// called with one whole IP packet at a time, never by two goroutines at
// once (the connections' readers take turns), and the slice is valid only
// during the call. deliver must not call Close. Serve returns nil once
// the link is closed and all its goroutines have ended; it may run only
// once. Until it runs, connections are accepted but not read.
func (l *Link) Serve(deliver func(frame []byte)) error {
	if deliver == nil {
		return fmt.Errorf("%w: Serve needs a deliver function", ErrConfig)
	}
	if !l.serveRun.CompareAndSwap(false, true) {
		return ErrServing
	}
	l.rxMu.Lock()
	l.deliver = deliver
	l.rxMu.Unlock()
	close(l.serving)
	<-l.done
	l.wg.Wait()
	return nil
}

// deliverFrame hands f to Serve's callback; false once the link is
// closed.
func (l *Link) deliverFrame(f []byte) bool {
	l.rxMu.Lock()
	defer l.rxMu.Unlock()
	if l.isClosed.Load() {
		return false
	}
	l.deliver(f)
	return true
}

// Close stops the listener, the connections and the link's goroutines;
// Serve returns when they have ended. Close does not wait for them, so it
// may be called with locks held that a deliver in progress needs.
func (l *Link) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		conns := make([]*conn, 0, len(l.conns))
		for c := range l.conns {
			conns = append(conns, c)
		}
		l.mu.Unlock()
		l.isClosed.Store(true)
		close(l.done)
		l.cancel()
		l.ln.Close()
		for _, c := range conns {
			c.raw.Close()
		}
	})
	return nil
}

// goRunLocked runs fn on a goroutine of the link, unless the link is closed.
// l.mu is held.
func (l *Link) goRunLocked(fn func()) bool {
	if l.closed {
		return false
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn()
	}()
	return true
}

// acceptLoop accepts connections until Close.
func (l *Link) acceptLoop() {
	defer l.wg.Done()
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if l.isClosed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, most likely: let some close.
			l.log.Warn("tcplink: accept failed", "err", err)
			select {
			case <-l.done:
				return
			case <-time.After(acceptRetry):
			}
			continue
		}
		c := l.newConn(nc, false, nil)
		slot, err := l.gate.Enter(c.remoteAP.Addr(), func() { nc.Close() })
		if err != nil {
			l.refuseLog.Log(l.log, slog.LevelWarn, "tcplink: connection refused before its handshake", "remote", c.remote, "err", err)
			nc.Close()
			continue
		}
		c.slot = slot
		l.mu.Lock()
		ok := l.registerLocked(c) && l.goRunLocked(c.run)
		l.mu.Unlock()
		if !ok {
			slot.Leave()
			nc.Close()
			return
		}
	}
}

// Peers returns the state of every peer the link knows.
func (l *Link) Peers() []PeerState {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]PeerState, 0, len(l.peers))
	for _, p := range l.peers {
		out = append(out, p.stateLocked())
	}
	return out
}

// CarriesTenants tells the engine that this link carries a multicast
// datagram's tenant (engine.TenantLink, protocol.go): the daemons at both
// ends are the switch's members, who are trusted to carry their tenants'
// traffic.
func (l *Link) CarriesTenants() bool { return true }
