package connmgr

// Stats are the listener's counters since the manager started.
type Stats struct {
	Inbound  int    // inbound connections open now
	Accepted uint64 // inbound connections admitted: handshake done, authorized
	// HandshakesRefused: inbound connections closed at once, their
	// source having Limits.Handshakes.PerSource in their handshake.
	HandshakesRefused uint64
	// HandshakesCut: inbound connections cut in their handshake to admit
	// a newer one.
	HandshakesCut uint64
	// HandshakeErrors: inbound connections whose TLS handshake failed or
	// did not finish in time.
	HandshakeErrors uint64
	// Unauthorized: connections, either way, Config.Authorize refused.
	Unauthorized uint64
	// WrongPeer: outgoing connections whose peer was not the identity
	// Config.Resolve expected at the endpoint.
	WrongPeer uint64
	// IdleClosed: inbound connections closed after Limits.IdleTimeout
	// without a CM connection or a message.
	IdleClosed uint64
	// Evicted: inbound connections closed to make room for a new one
	// (Limits.PerSource or Inbound reached).
	Evicted uint64
	// LogsSuppressed: log lines about refused or closed connections left
	// out because too many came at once.
	LogsSuppressed uint64

	// WrongSource: requests refused because their source GID is not an
	// address of the host that sent them (Config.PeerOwns), or is one of
	// this host's.
	WrongSource uint64
	// Lagging: requests refused because the listening session was not
	// reading its events (Session.Lagging).
	Lagging uint64
	// OverLimit: requests refused because the listening session's tenant
	// had all the connections its quota allows (Session.Charge).
	OverLimit uint64
}

// Stats returns the listener's counters.
func (m *Manager) Stats() Stats {
	a := m.adm
	g := a.gate.Stats()
	m.mu.Lock()
	n := len(m.inbound)
	m.mu.Unlock()
	return Stats{Inbound: n, Accepted: a.accepted.Load(), HandshakesRefused: g.Refused, HandshakesCut: g.Cut,
		HandshakeErrors: a.hsErrors.Load(), Unauthorized: a.unauthorized.Load(), WrongPeer: a.wrongPeer.Load(),
		IdleClosed: a.idleClosed.Load(), Evicted: a.evicted.Load(), LogsSuppressed: a.log.Suppressed(),
		WrongSource: a.wrongSource.Load(), Lagging: a.lagging.Load(), OverLimit: a.overLimit.Load()}
}
