package connmgr

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/vrdma/vrdma/internal/cm"
)

// Limits and timeouts of the connection manager.
const (
	defaultTimeout = 60 * time.Second // a request's, when the client gives none
	grace          = time.Second      // added to a timeout a client gave: its own deadline ends the wait first
	maxTimeout     = 10 * time.Minute
	defaultBacklog = 128
	maxBacklog     = 4096
	maxListeners   = 256   // per session
	maxConns       = 8192  // per session
	ephemeralFirst = 32768 // ports the requesters' side of a connection gets
	ephemeralLast  = 60999
)

// Config configures a Manager. The daemon fills it from its own Config's
// CM fields.
type Config struct {
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
	// between the two GIDs). nil: no MADs; only the adapters of this host
	// are reached.
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

// Manager is the daemon's connection manager: its API (manager_api.go)
// over the parts below, each of one concern, which share the state of
// core under its one lock.
type Manager struct {
	*core
}

// core is the manager's state, and the parts that work on it: every part
// embeds it, so that each reaches the state and the other parts (m.book,
// m.retr ...) alike.
type core struct {
	ports *ports        // the sessions' listeners, ids and the host's port space (listen.go)
	book  *connBook     // connections by id, their states and timers (conn.go)
	msgs  *peerMessages // what a peer sends: the IBTA CM state machine (wire.go, sidr.go)
	cmds  *commands     // what a session asks: dial, accept, reject, disconnect (connect.go, sidr.go)
	mad   *madTransport // CM MADs on QP1 to and from other hosts (gsi.go)
	retr  *retrier      // sending, and sending again over MADs (retry.go)
	tw    *timeWaits    // TIMEWAIT and requests in progress per source (timewait.go)

	log      *slog.Logger
	host     Host
	hostName string
	local    *peer      // connections between adapters of this host
	adm      *admission // requests refused (admit.go)

	mu        sync.Mutex
	closed    bool
	listeners map[uint16]*listener      // by port: one port space for the host
	conns     map[uint32]*connection    // by this side's id
	remote    map[remoteKey]*connection // by the peer and its id
	sessions  map[Session]*sessionPart
	rng       *rand.Rand

	// The CM over MADs: its counters and timing (gsi.go, retry.go).
	mads                              madStats
	respTimeout, packetLife, maxRetry uint8

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

// New starts a connection manager: the in-process peer between the
// adapters of this host, and the MAD transport on cfg.GSI. Close stops it.
func New(cfg Config) (*Manager, error) {
	if cfg.Host == nil {
		return nil, errors.New("connection manager: Config.Host is nil: give the host whose adapters' GIDs are local")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &core{
		log: log, host: cfg.Host, hostName: cfg.HostName, adm: &admission{},
		listeners: map[uint16]*listener{}, conns: map[uint32]*connection{}, remote: map[remoteKey]*connection{},
		sessions:    map[Session]*sessionPart{},
		rng:         rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		respTimeout: orDefault(cfg.ResponseTimeout, defaultResponseTimeout),
		packetLife:  orDefault(cfg.PacketLife, defaultPacketLife), maxRetry: orDefault(cfg.MaxCMRetries, defaultMaxCMRetries),
	}
	tw := &timeWaits{core: m, timeWaitIDs: map[uint32]struct{}{}, timeWaitRemote: map[remoteKey]cm.Message{},
		inProgress: map[[16]byte]int{}, maxInProgress: cfg.MaxInProgressPerSource}
	if tw.maxInProgress <= 0 {
		tw.maxInProgress = defaultInProgressPerSource
	}
	// TIMEWAIT outlasts a peer's retransmissions: a late REQ is told it
	// is stale, a repeated SIDR_REQ gets its answer again (a SIDR_REQ says
	// nothing of how long its sender waits: rdma_cm's ~4.3 s, times a few).
	tw.timeWait = max(cmTime(m.respTimeout)+2*cmTime(m.packetLife), minTimeWait)
	m.ports, m.book, m.msgs, m.cmds = &ports{core: m, ephemeral: ephemeralFirst}, &connBook{m}, &peerMessages{m}, &commands{m}
	m.mad, m.retr, m.tw = &madTransport{core: m}, &retrier{m}, tw
	m.local = newPeer(m, "this host")
	m.local.local = true
	m.wg.Add(1)
	go m.local.runLocal()
	if cfg.GSI != nil {
		m.mad.startGSI(cfg.GSI)
	}
	return &Manager{m}, nil
}

// Close stops the MAD transport and the in-process peer and waits for
// their goroutines.
// The daemon calls it once its sessions are gone (CloseSession): what they
// sent on their way out is written first.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	for _, c := range m.conns {
		c.stopTimer()
	}
	m.mu.Unlock()
	m.mad.stopGSI()
	m.local.close()
	m.wg.Wait()
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
