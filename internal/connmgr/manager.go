package connmgr

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/proto"
)

// ListenOff in Config.Listen runs no listener: connections between
// adapters of this host still work, and so do connections this host dials;
// requests from other hosts cannot arrive.
const ListenOff = "off"

// Limits and timeouts of the connection manager.
const (
	defaultTimeout = 60 * time.Second // a request's, when the client gives none
	grace          = time.Second      // added to a timeout a client gave: its own deadline ends the wait first
	maxTimeout     = 10 * time.Minute
	defaultBacklog = 128
	maxBacklog     = 4096
	maxListeners   = 256  // per session
	maxConns       = 8192 // per session
	maxPeers       = 4096 // TCP connections to and from other daemons, each way
	dialTimeout    = 10 * time.Second
	writeTimeout   = 10 * time.Second
	maxQueue       = 1 << 20 // bytes queued to one peer before it counts as stuck
	ephemeralFirst = 32768   // ports the requesters' side of a connection gets
	ephemeralLast  = 60999
)

// Config configures a Manager. The daemon fills it from its own Config's
// CM fields.
type Config struct {
	// Listen is the TCP address of the listener: "" is 127.0.0.1:4793
	// (DefaultPort, on loopback: nothing beyond the host unless asked),
	// ListenOff none. A default that is taken is a warning; an explicit
	// address that cannot be had, an error.
	Listen string
	// ListenIsDefault says Listen is a default the caller chose (the
	// daemon's listen policy), taken like "".
	ListenIsDefault bool
	// Resolve finds the connection manager of a remote adapter's daemon
	// and the identity expected there (needed with Authorize). nil:
	// DefaultResolve, naming no identity.
	Resolve PeerResolver
	// TLS protects connections both ways (mutual with ClientCAs); nil:
	// plain TCP.
	TLS *tls.Config
	// Authorize names the daemon at the other end of every connection,
	// inbound and outbound, or refuses it; nil: anyone.
	Authorize admit.Authorizer
	// PeerOwns reports whether the host that a connection was authorized
	// as (the identity Authorize named) owns gid: a request from that
	// connection must come from one of its host's addresses (its SrcGID),
	// or it is rejected (REJ, invalid GID) and counted. Used only with
	// Authorize, which also makes every request whose source is one of
	// this host's addresses rejected when it comes over TCP. nil, with
	// Authorize: only that last check; without Authorize: no check of the
	// source at all.
	PeerOwns func(identity string, gid [16]byte) bool
	// Limits bound what other hosts may hold of the listener; zero
	// fields take the defaults.
	Limits Limits
	// Host answers whether a GID is one of this host's adapters': a
	// request for one stays in process, and a request that arrives for
	// another is refused.
	Host Host
	// HostName names this host in the reasons of refusals.
	HostName string
	// Logger gets refusals (a few lines at a time) and failures; nil: none.
	Logger *slog.Logger

	// GSI is QP1 of the host's links: connections to other hosts' adapters
	// are set up with IBTA CM MADs on it, as Linux rdma_cm does (over RoCEv2,
	// or inside the TCP channel's packets, whichever link the host routes
	// between the two GIDs). nil: no MADs; other hosts are reached over TCP.
	GSI GSI
	// ResponseTimeout is the CM response timeout a REQ of this side asks of
	// the responder, an exponent of 4.096 µs (0: 18, about 1.07 s;
	// rdma_cm's is 20), PacketLife the packet life time counted twice in
	// each retransmission interval (0: 14, about 67 ms), and MaxCMRetries
	// how many times a REQ, REP or DREQ is sent again (0: 15, rdma_cm's).
	ResponseTimeout, PacketLife, MaxCMRetries uint8
	// MaxInProgressPerSource bounds the requests from one remote GID that
	// are being set up here (not yet established) over MADs: past it a REQ
	// (or SIDR_REQ) is refused (no resources) and counted, so that a flood
	// from one address cannot take every listener's backlog. 0: 256.
	MaxInProgressPerSource int
}

// Manager is the daemon's connection manager.
type Manager struct {
	log      *slog.Logger
	host     Host
	hostName string
	resolve  PeerResolver
	peerOwns func(identity string, gid [16]byte) bool // Config.PeerOwns
	ln       net.Listener                             // nil: requests from other hosts are not served
	local    *peer                                    // connections between adapters of this host
	adm      *admission                               // who gets in (admit.go)

	mu        sync.Mutex
	closed    bool
	listeners map[uint16]*listener      // by port: one port space for the host
	conns     map[uint32]*connection    // by this side's id
	remote    map[remoteKey]*connection // by the peer and its id
	sessions  map[Session]*sessionPart
	peers     map[string]*peer // dialled, by endpoint
	inbound   map[*peer]struct{}
	ephemeral uint16
	rng       *rand.Rand

	// The MAD transport (gsi.go, retry.go).
	gsi                               GSI
	gsiPeer                           *peer // every remote CM reached by MADs
	madIn                             chan inMAD
	madOut                            chan outMAD
	madStop                           chan struct{}
	mads                              madStats
	respTimeout, packetLife, maxRetry uint8
	timeWait                          time.Duration
	timeWaitQ                         []timeWaitEntry
	timeWaitIDs                       map[uint32]struct{}
	timeWaitRemote                    map[remoteKey]cm.Message
	inProgress                        map[[16]byte]int // requests being set up, by remote GID (MADs)
	maxInProgress                     int

	wg sync.WaitGroup
}

// remoteKey names a connection by the peer's side of it.
type remoteKey struct {
	p   *peer
	gid [16]byte // over MADs: the peer's GID
	id  uint32
}

// sessionPart is what one session has of the connection manager, by the
// ids the session knows them by.
type sessionPart struct {
	listeners map[uint32]*listener
	conns     map[uint32]*connection
	nextID    uint32 // the next id the manager gives a request
}

// listener is a port a session listens on.
type listener struct {
	id      uint32
	port    uint16
	s       Session
	backlog int
	pending int // requests handed to the session and not answered yet
}

// New starts a connection manager: its listener (unless cfg.Listen is
// ListenOff) and the in-process peer between the adapters of this host.
// Close stops it.
func New(cfg Config) (*Manager, error) {
	if cfg.Host == nil {
		return nil, errors.New("connection manager: Config.Host is nil: give the host whose adapters' GIDs are local")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	resolve := cfg.Resolve
	if resolve == nil {
		resolve = Resolver(DefaultResolve).Endpoints()
	}
	m := &Manager{
		log: log, host: cfg.Host, hostName: cfg.HostName, resolve: resolve, peerOwns: cfg.PeerOwns,
		listeners: map[uint16]*listener{}, conns: map[uint32]*connection{}, remote: map[remoteKey]*connection{},
		sessions: map[Session]*sessionPart{}, peers: map[string]*peer{}, inbound: map[*peer]struct{}{},
		ephemeral: ephemeralFirst, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		respTimeout: orDefault(cfg.ResponseTimeout, defaultResponseTimeout),
		packetLife:  orDefault(cfg.PacketLife, defaultPacketLife), maxRetry: orDefault(cfg.MaxCMRetries, defaultMaxCMRetries),
		timeWaitIDs: map[uint32]struct{}{}, timeWaitRemote: map[remoteKey]cm.Message{},
		inProgress: map[[16]byte]int{}, maxInProgress: cfg.MaxInProgressPerSource,
	}
	if m.maxInProgress <= 0 {
		m.maxInProgress = defaultInProgressPerSource
	}
	// TIMEWAIT outlasts a peer's retransmissions: a late REQ is told it
	// is stale, a repeated SIDR_REQ gets its answer again (a SIDR_REQ says
	// nothing of how long its sender waits: rdma_cm's ~4.3 s, times a few).
	m.timeWait = max(cmTime(m.respTimeout)+2*cmTime(m.packetLife), minTimeWait)
	var err error
	if m.adm, err = newAdmission(&cfg); err != nil {
		return nil, err
	}
	addr := cfg.Listen
	if addr != ListenOff {
		def := addr == "" || cfg.ListenIsDefault
		if addr == "" {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultPort))
		}
		ln, err := net.Listen("tcp", addr)
		switch {
		case err != nil && def && errors.Is(err, syscall.EADDRINUSE):
			m.log.Warn("connection manager: TCP port in use, requests from other hosts will not reach this one",
				"addr", addr, "fix", "stop what holds the port, or give the daemon another CM address (Config.CMListen)")
		case err != nil:
			return nil, fmt.Errorf("connection manager: listen on %s: %w (give another address, or %q for none)", addr, err, ListenOff)
		default:
			m.ln = ln
		}
	}
	m.local = newPeer(m, "this host", "")
	m.local.local = true
	m.wg.Add(1)
	go m.local.runLocal()
	if m.ln != nil {
		m.wg.Add(1)
		go m.acceptLoop()
	}
	if cfg.GSI != nil {
		m.startGSI(cfg.GSI)
	}
	return m, nil
}

// Addr returns the address the listener listens on, or nil.
func (m *Manager) Addr() net.Addr {
	if m.ln == nil {
		return nil
	}
	return m.ln.Addr()
}

func (m *Manager) acceptLoop() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			m.mu.Lock()
			closed := m.closed
			m.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.log.Warn("connection manager: accept", "err", err)
			time.Sleep(50 * time.Millisecond) // out of descriptors: let some close
			continue
		}
		m.admitInbound(c) // admit.go
	}
}

// Close stops the listener and every peer and waits for their goroutines.
// The daemon calls it once its sessions are gone (CloseSession): what they
// sent on their way out is written first.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.closeHandshakesLocked()
	for _, c := range m.conns {
		c.stopTimer()
	}
	peers := []*peer{m.local}
	for _, p := range m.peers {
		peers = append(peers, p)
	}
	for p := range m.inbound {
		peers = append(peers, p)
	}
	m.mu.Unlock()
	m.stopGSI()
	if m.ln != nil {
		m.ln.Close()
	}
	for _, p := range peers {
		p.close()
	}
	m.wg.Wait()
}

// session returns s's part, creating it; m.mu is held.
func (m *Manager) session(s Session) *sessionPart {
	sp := m.sessions[s]
	if sp == nil {
		sp = &sessionPart{listeners: map[uint32]*listener{}, conns: map[uint32]*connection{}, nextID: proto.CMDaemonIDBase}
		m.sessions[s] = sp
	}
	return sp
}

// newID returns an unused id for a connection of this side: random, so
// that a peer cannot guess the ids of other connections.
func (m *Manager) newID() uint32 {
	for {
		id := m.rng.Uint32()
		_, used := m.conns[id]
		_, waits := m.timeWaitIDs[id]
		if id != 0 && !used && !waits {
			return id
		}
	}
}

// nextEphemeral returns a port no listener has, from the ephemeral range:
// for a listener that asked for port 0, and for the requester's side of a
// connection (where it is informational: it names the connection to the
// peer, as rdma_cm's source port does).
func (m *Manager) nextEphemeral() (uint16, bool) {
	for i := 0; i <= ephemeralLast-ephemeralFirst; i++ {
		p := m.ephemeral
		m.ephemeral++
		if m.ephemeral > ephemeralLast {
			m.ephemeral = ephemeralFirst
		}
		if m.listeners[p] == nil {
			return p, true
		}
	}
	return 0, false
}

// defaultInProgressPerSource is Config.MaxInProgressPerSource's default.
const defaultInProgressPerSource = 256

// minTimeWait is the shortest TIMEWAIT.
const minTimeWait = 10 * time.Second

func orDefault(v, def uint8) uint8 {
	if v == 0 {
		return def
	}
	return v
}

// timeoutOf turns a client's or a peer's timeout in milliseconds into how
// long this daemon waits: 0 is the default, and it is bounded. A timeout
// that came with a request gets a grace period: the client (or the peer)
// that gave it gives up first and says so with a REJ, and this daemon's
// timer only cleans up after one that never did.
func timeoutOf(ms uint32) time.Duration {
	if ms == 0 {
		return defaultTimeout
	}
	return min(time.Duration(ms)*time.Millisecond, maxTimeout) + grace
}
