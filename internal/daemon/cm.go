package daemon

// The connection manager. Sessions listen (cm_listen.go), dial, accept,
// reject and disconnect (cm_connect.go) through commands (cm_cmd.go) and
// hear of the outcome through events (cm_events.go); the daemons exchange
// the IBTA CM messages of package cm over TCP, or in process between the
// adapters of this host (cm_peer.go); cm_wire.go runs what arrives and
// cm_conn.go holds a connection's state. docs/design/connection-manager.md
// says why it is built this way.

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/proto"
)

// DefaultCMPort is the TCP port of the connection manager.
const DefaultCMPort = cm.DefaultPort

// CMListenOff in Config.CMListen runs no connection manager listener:
// connections between adapters of this host still work, and so do
// connections this host dials; requests from other hosts cannot arrive.
const CMListenOff = "off"

// CMResolver maps the address of a remote adapter (a GID; IPv4 unmapped)
// to the TCP endpoint, host:port, of its daemon's connection manager.
type CMResolver func(addr netip.Addr) (string, error)

// DefaultCMResolve reaches the daemon at the adapter's address itself, on
// DefaultCMPort.
func DefaultCMResolve(addr netip.Addr) (string, error) {
	if addr.Is6() && addr.IsLinkLocalUnicast() && addr.Zone() == "" {
		return "", fmt.Errorf("%s is link-local and says nothing of the interface it is on: dial one of the adapter's routable addresses (an IPv4 GID ::ffff:a.b.c.d, say)", addr)
	}
	return net.JoinHostPort(addr.String(), strconv.Itoa(DefaultCMPort)), nil
}

// Limits and timeouts of the connection manager.
const (
	cmDefaultTimeout  = 60 * time.Second // a request's, when the client gives none
	cmGrace           = time.Second      // added to a timeout a client gave: its own deadline ends the wait first
	cmMaxTimeout      = 10 * time.Minute
	cmDefaultBacklog  = 128
	cmMaxBacklog      = 4096
	cmMaxListeners    = 256  // per session
	cmMaxConns        = 8192 // per session
	cmMaxPeers        = 4096 // TCP connections to and from other daemons, each way
	cmDialTimeout     = 10 * time.Second
	cmWriteTimeout    = 10 * time.Second
	cmMaxQueue        = 1 << 20 // bytes queued to one peer before it counts as stuck
	cmEphemeralFirst  = 32768   // ports the requesters' side of a connection gets
	cmEphemeralLast   = 60999
	cmOutboxMaxEvents = 1 << 16 // per session: far above what its connections can produce
)

// cmManager is the daemon's connection manager.
type cmManager struct {
	d       *Daemon
	log     *slog.Logger
	resolve func(netip.Addr) (admit.Endpoint, error) // Config.CMResolvePeer, or CMResolve
	ln      net.Listener                             // nil: requests from other hosts are not served
	local   *cmPeer                                  // connections between adapters of this host
	adm     *cmAdmission                             // who gets in (cm_admit.go)

	mu        sync.Mutex
	closed    bool
	listeners map[uint16]*cmListener // by port: one port space for the host
	conns     map[uint32]*cmConn     // by this side's id
	remote    map[remoteKey]*cmConn  // by the peer and its id
	sessions  map[*session]*cmSession
	peers     map[string]*cmPeer // dialled, by endpoint
	inbound   map[*cmPeer]struct{}
	ephemeral uint16
	rng       *rand.Rand

	wg sync.WaitGroup
}

// remoteKey names a connection by the peer's side of it.
type remoteKey struct {
	p  *cmPeer
	id uint32
}

// cmSession is what one session has of the connection manager, by the ids
// the session knows them by.
type cmSession struct {
	listeners map[uint32]*cmListener
	conns     map[uint32]*cmConn
	nextID    uint32 // the next id the daemon gives a request
}

// cmListener is a port a session listens on.
type cmListener struct {
	id      uint32
	port    uint16
	s       *session
	backlog int
	pending int // requests handed to the session and not answered yet
}

func newCMManager(d *Daemon) (*cmManager, error) {
	m := &cmManager{
		d: d, log: d.log.With("part", "cm"), resolve: cmResolvePeer(&d.cfg),
		listeners: map[uint16]*cmListener{}, conns: map[uint32]*cmConn{}, remote: map[remoteKey]*cmConn{},
		sessions: map[*session]*cmSession{}, peers: map[string]*cmPeer{}, inbound: map[*cmPeer]struct{}{},
		ephemeral: cmEphemeralFirst, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	var err error
	if m.adm, err = newCMAdmission(&d.cfg); err != nil {
		return nil, err
	}
	addr := d.cfg.CMListen
	if addr != CMListenOff {
		def := addr == "" || d.cmListenDefault
		if def {
			addr = ":" + strconv.Itoa(DefaultCMPort)
		}
		ln, err := net.Listen("tcp", addr)
		switch {
		case err != nil && def && errors.Is(err, syscall.EADDRINUSE):
			m.log.Warn("connection manager: TCP port in use, requests from other hosts will not reach this one",
				"port", DefaultCMPort, "fix", "stop what holds the port, or give the daemon another CM address (Config.CMListen)")
		case err != nil:
			return nil, fmt.Errorf("daemon: connection manager: listen on %s: %w (give another address, or %q for none)", addr, err, CMListenOff)
		default:
			m.ln = ln
		}
	}
	m.local = newCMPeer(m, "this host", "")
	m.local.local = true
	m.wg.Add(1)
	go m.local.runLocal()
	if m.ln != nil {
		m.wg.Add(1)
		go m.acceptLoop()
	}
	return m, nil
}

// CMAddr returns the address the connection manager listens on, or nil.
func (d *Daemon) CMAddr() net.Addr {
	if d.cm == nil || d.cm.ln == nil {
		return nil
	}
	return d.cm.ln.Addr()
}

func (m *cmManager) acceptLoop() {
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
		m.admitInbound(c) // cm_admit.go
	}
}

// close stops the listener and every peer and waits for their goroutines.
// The sessions are gone already: what they sent on their way out is
// written first.
func (m *cmManager) close() {
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
	peers := []*cmPeer{m.local}
	for _, p := range m.peers {
		peers = append(peers, p)
	}
	for p := range m.inbound {
		peers = append(peers, p)
	}
	m.mu.Unlock()
	if m.ln != nil {
		m.ln.Close()
	}
	for _, p := range peers {
		p.close()
	}
	m.wg.Wait()
}

// session returns s's part, creating it.
func (m *cmManager) session(s *session) *cmSession {
	cs := m.sessions[s]
	if cs == nil {
		cs = &cmSession{listeners: map[uint32]*cmListener{}, conns: map[uint32]*cmConn{}, nextID: proto.CMDaemonIDBase}
		m.sessions[s] = cs
	}
	return cs
}

// newID returns an unused id for a connection of this side: random, so
// that a peer cannot guess the ids of other connections.
func (m *cmManager) newID() uint32 {
	for {
		id := m.rng.Uint32()
		if _, used := m.conns[id]; id != 0 && !used {
			return id
		}
	}
}

// nextEphemeral returns a port no listener has, from the ephemeral range:
// for a listener that asked for port 0, and for the requester's side of a
// connection (where it is informational: it names the connection to the
// peer, as rdma_cm's source port does).
func (m *cmManager) nextEphemeral() (uint16, bool) {
	for i := 0; i <= cmEphemeralLast-cmEphemeralFirst; i++ {
		p := m.ephemeral
		m.ephemeral++
		if m.ephemeral > cmEphemeralLast {
			m.ephemeral = cmEphemeralFirst
		}
		if m.listeners[p] == nil {
			return p, true
		}
	}
	return 0, false
}

// emit queues an event for s.
func (m *cmManager) emit(s *session, ev proto.CMEvent) { s.cmOut.push(ev) }

// timeoutOf turns a client's or a peer's timeout in milliseconds into how
// long this daemon waits: 0 is the default, and it is bounded. A timeout
// that came with a request gets a grace period: the client (or the peer)
// that gave it gives up first and says so with a REJ, and this daemon's
// timer only cleans up after one that never did.
func timeoutOf(ms uint32) time.Duration {
	if ms == 0 {
		return cmDefaultTimeout
	}
	return min(time.Duration(ms)*time.Millisecond, cmMaxTimeout) + cmGrace
}
