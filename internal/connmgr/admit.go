package connmgr

// What the manager refuses of the requests other hosts send it, counted
// (Manager.Stats) and logged, a few lines at a time.

import (
	"log/slog"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/admit"
)

// admission counts the requests refused.
type admission struct {
	log admit.LogLimit
	// Requests refused: from a source that is not the packet's, or is
	// this host's; for a listener whose session is not reading its
	// events; at the limit of the listener's owner.
	wrongSource, lagging, overLimit atomic.Uint64
	// MADs dropped: requests from outside the switch for a listener
	// that is not a native endpoint (refuseOutsider).
	outsiders atomic.Uint64
}

// refused logs a refusal, a few lines at a time.
func (m *core) refused(msg string, args ...any) {
	m.adm.log.Log(m.log, slog.LevelWarn, msg, args...)
}
