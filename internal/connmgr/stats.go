package connmgr

// Stats are the manager's counters since it started.
type Stats struct {
	// LogsSuppressed: log lines about refused requests left out because
	// too many came at once.
	LogsSuppressed uint64

	// WrongSource: requests refused because their source GID is not the
	// packet's, or is one of this host's.
	WrongSource uint64
	// Lagging: requests refused because the listening session was not
	// reading its events (Session.Lagging).
	Lagging uint64
	// OverLimit: requests refused because the listening session's tenant
	// had all the connections its quota allows (Session.Charge).
	OverLimit uint64
	// Outsiders: requests (REQ, SIDR_REQ) over MADs from outside the
	// switch (Host.IsOutsider) dropped unanswered: no listener on their
	// port accepts native endpoints.
	Outsiders uint64

	// The CM MADs on QP1 (gsi.go, retry.go).
	MADsIn          uint64 // MADs run
	MADsDropped     uint64 // MADs that arrived with the queue full
	MADsMalformed   uint64 // MADs that do not decode (or not a CM Send of class version 2)
	MADsUnsupported uint64 // SIDR, LAP, APR, ClassPortInfo: not served
	MADSendErrors   uint64 // MADs the host could not send
	MADsNotSent     uint64 // MADs dropped with the send queue full
	Retransmits     uint64 // REQs, REPs and DREQs sent again on a timeout
	Duplicates      uint64 // duplicate REQs, REPs and DREQs answered (or ignored)
	MRAsSent        uint64
	MRAsReceived    uint64
	StaleRequests   uint64 // REQs for a connection in TIMEWAIT, rejected as stale
	BacklogFull     uint64 // requests refused because their listener's backlog was full
	InProgressLimit uint64 // requests refused because their source had Config.MaxInProgressPerSource being set up
	MTURetries      uint64 // REQs sent again with the smaller MTU a REJ (invalid path MTU) named
}

// Stats returns the manager's counters.
func (m *Manager) Stats() Stats {
	a := m.adm
	return Stats{LogsSuppressed: a.log.Suppressed(),
		WrongSource: a.wrongSource.Load(), Lagging: a.lagging.Load(), OverLimit: a.overLimit.Load(), Outsiders: a.outsiders.Load(),
		MADsIn: m.mads.in.Load(), MADsDropped: m.mads.dropped.Load(), MADsMalformed: m.mads.malformed.Load(),
		MADsUnsupported: m.mads.unsupported.Load(), MADSendErrors: m.mads.sendErrors.Load(), MADsNotSent: m.mads.outDropped.Load(),
		Retransmits: m.mads.retransmits.Load(), Duplicates: m.mads.duplicates.Load(), MRAsSent: m.mads.mraSent.Load(),
		MRAsReceived: m.mads.mraReceived.Load(), StaleRequests: m.mads.stale.Load(), BacklogFull: m.mads.backlogFull.Load(),
		InProgressLimit: m.mads.inProgressLimit.Load(), MTURetries: m.mads.mtuRetries.Load()}
}
