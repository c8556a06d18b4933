package connmgr

import (
	"fmt"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
)

// Defaults of Limits.
const (
	DefaultIdleTimeout = 30 * time.Second
	DefaultPerSource   = 8
	DefaultInbound     = maxPeers
)

// Limits bound what other hosts may hold of the connection manager's
// listener. Zero fields take the defaults.
type Limits struct {
	// Handshakes bounds the inbound connections in their handshake (TLS
	// and Config.Authorize): per source address, and in all, the oldest
	// cut when all are taken. Zero fields: 4 per source, 64 in all.
	Handshakes admit.Limits
	// HandshakeTimeout bounds the handshake, and the reading of a frame
	// once its first byte came. 0: 5 s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes an inbound connection that carries no CM
	// connection (in progress or established) and sends nothing for this
	// long. 0: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// PerSource bounds the inbound connections from one address (a daemon
	// needs one); at the limit, that address's idlest is closed for the
	// new one. 0: DefaultPerSource.
	PerSource int
	// Inbound bounds the inbound connections in all; at the limit, the
	// idlest is closed for the new one. 0: DefaultInbound.
	Inbound int
}

// check refuses negative limits and fills in the defaults.
func (l *Limits) check() error {
	if l.HandshakeTimeout < 0 || l.IdleTimeout < 0 || l.PerSource < 0 || l.Inbound < 0 {
		return fmt.Errorf("connection manager: negative CMLimits %+v: give positive ones, or 0 for the defaults", *l)
	}
	if err := l.Handshakes.Check(); err != nil {
		return fmt.Errorf("connection manager: %w", err)
	}
	if l.HandshakeTimeout == 0 {
		l.HandshakeTimeout = admit.DefaultHandshakeTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.PerSource == 0 {
		l.PerSource = DefaultPerSource
	}
	if l.Inbound == 0 {
		l.Inbound = DefaultInbound
	}
	return nil
}
