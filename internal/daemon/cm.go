package daemon

// The daemon's side of the connection manager (package connmgr): the
// manager built from Config's CM fields, the session as the manager sees
// it (cm_session.go), the commands (cm_cmd.go) and the events it queues
// for a session (cm_events.go). docs/design/connection-manager.md says why
// it is built this way.

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vrdma/vrdma/internal/connmgr"
)

// DefaultCMPort is the TCP port of the connection manager.
const DefaultCMPort = connmgr.DefaultPort

// CMListenOff in Config.CMListen runs no connection manager listener:
// connections between adapters of this host still work, and so do
// connections this host dials; requests from other hosts cannot arrive.
const CMListenOff = connmgr.ListenOff

// CMResolver maps the address of a remote adapter (a GID; IPv4 unmapped)
// to the TCP endpoint, host:port, of its daemon's connection manager.
type CMResolver = connmgr.Resolver

// DefaultCMResolve reaches the daemon at the adapter's address itself, on
// DefaultCMPort.
func DefaultCMResolve(addr netip.Addr) (string, error) { return connmgr.DefaultResolve(addr) }

// CMLimits bound what other hosts may hold of the connection manager's
// listener (connmgr.Limits). Zero fields take the defaults.
type CMLimits = connmgr.Limits

// Defaults of CMLimits.
const (
	DefaultCMIdleTimeout = connmgr.DefaultIdleTimeout
	DefaultCMPerSource   = connmgr.DefaultPerSource
	DefaultCMInbound     = connmgr.DefaultInbound
)

// CMStats are the connection manager listener's counters since the daemon
// started (connmgr.Stats).
type CMStats = connmgr.Stats

// CMAuthError says why a CM connection was refused after its handshake
// (connmgr.AuthError).
type CMAuthError = connmgr.AuthError

// Errors of the connection manager's admission; match them with
// errors.Is.
var (
	// ErrCMUnauthorized: CMAuthorize refused a connection, or the peer was
	// not the identity expected at the endpoint.
	ErrCMUnauthorized = connmgr.ErrUnauthorized
	// ErrCMIdle: an inbound connection carried nothing for IdleTimeout.
	ErrCMIdle = connmgr.ErrIdle
	// ErrCMEvicted: an inbound connection was closed to make room.
	ErrCMEvicted = connmgr.ErrEvicted
)

// newCM starts the connection manager of d's config.
func newCM(d *Daemon) (*connmgr.Manager, error) {
	m, err := connmgr.New(connmgr.Config{Listen: d.cfg.CMListen, ListenIsDefault: d.cmListenDefault, Resolve: cmResolve(&d.cfg), TLS: d.cfg.CMTLS,
		Authorize: d.cfg.CMAuthorize, PeerOwns: d.cfg.CMPeerOwns, Limits: d.cfg.CMLimits, Host: d.host, HostName: d.cfg.HostName,
		Logger: d.log.With("part", "cm"), GSI: d.host})
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	return m, nil
}

// cmResolve is the resolver the manager uses: Config.CMResolvePeer, or
// Config.CMResolve (DefaultCMResolve if nil), which names no identity.
func cmResolve(cfg *Config) connmgr.PeerResolver {
	if cfg.CMResolvePeer != nil {
		return cfg.CMResolvePeer
	}
	if cfg.CMResolve != nil {
		return cfg.CMResolve.Endpoints()
	}
	return nil // the manager's default: DefaultCMResolve
}

// CMAddr returns the address the connection manager listens on, or nil.
func (d *Daemon) CMAddr() net.Addr {
	if d.cm == nil {
		return nil
	}
	return d.cm.Addr()
}

// CMStats returns the connection manager listener's counters.
func (d *Daemon) CMStats() CMStats {
	if d.cm == nil {
		return CMStats{}
	}
	return d.cm.Stats()
}
