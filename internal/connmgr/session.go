package connmgr

import (
	"sync"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// Session is a client session of the daemon as the manager sees it: the
// owner of listeners and connections, which the library names by its own
// ids. The manager keeps a session's listeners and connections until
// CloseSession, and uses Session values as map keys: they must be
// comparable (a pointer).
//
// Locks: the daemon calls Listen ... Disconnect holding the session's lock
// (Lock), and the manager takes its own inside it; the manager takes the
// session's lock only holding none of its own. It calls InstanceFor, Emit,
// Lagging, Charge and Uncharge holding its own lock.
type Session interface {
	// Adapter is the adapter the session opened: the manager reads its
	// GIDs (the source GID of a connection) and its port's active MTU.
	Adapter() *engine.Adapter
	// InstanceFor names the session's instance in a message for asker's
	// client (a port asker wants is this session's): "" if it has none,
	// or if asker may not know it (another tenant's instance, which the
	// daemon lists to its owner and administrators only).
	InstanceFor(asker Session) string
	// Emit queues ev for the session's client. It must not block or call
	// the manager, and should not lose the event (a lost reply leaves a
	// dial waiting for its timeout). What it queues is bounded by the
	// session's charges: every event is about a connection the session
	// was charged for (Charge, Uncharge).
	Emit(ev proto.CMEvent)
	// Lagging reports whether the session's client is behind on its
	// events: so many wait to be delivered that it has stopped reading
	// them. The manager then refuses requests to the session's listeners
	// (REJ, no resources, as a receiver not ready) instead of queueing
	// more.
	Lagging() bool
	// Charge takes one r from the quota of the session's tenant before
	// the manager creates it, or returns why it may not (a *proto.Error,
	// CodeLimit, that names the limit and how to raise it). It must not
	// block or call the manager.
	Charge(r Resource) error
	// Uncharge gives back one r the manager no longer holds. The session
	// may keep a connection's charge until the events it queued before
	// are delivered to its client, so that its quota bounds its queued
	// events too. It must not block or call the manager.
	Uncharge(r Resource)
	// QP returns the session's queue pair with handle h, or the error
	// the command fails with (a *proto.Error, CodeNotFound). The
	// session's lock is held.
	QP(h uint32) (*engine.QP, error)
	// Lock and Unlock take and release the session's lock, the one its
	// commands run under and that guards its QPs: the manager takes it
	// to move a QP to the error state when a connection ends (a REJ,
	// DREQ, timeout or lost peer).
	sync.Locker
}

// Host is what the manager asks of the daemon's host.
type Host interface {
	// IsLocalGID reports whether gid is the GID of an adapter of this
	// host: a connection to it stays in process, and a request for
	// another GID is refused. *engine.Host has it.
	IsLocalGID(gid [16]byte) bool
	// IsOutsider reports whether gid, the source of a MAD, is outside the
	// switch: on a switch with certificates, an address no member host
	// publishes. A request from it reaches only a listener whose adapter
	// accepts native endpoints (engine.Adapter.NativeEndpoint); others are
	// dropped unanswered and counted. *engine.Host has it.
	IsOutsider(gid [16]byte) bool
}
