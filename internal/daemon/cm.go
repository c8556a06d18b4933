package daemon

// The daemon's side of the connection manager (package connmgr): the
// manager built from Config's CM fields, the session as the manager sees
// it (cm_session.go), the commands (cm_cmd.go) and the events it queues
// for a session (cm_events.go). docs/design/connection-manager.md says why
// it is built this way.

import (
	"fmt"

	"github.com/vrdma/vrdma/internal/connmgr"
)

// CMStats are the connection manager's counters since the daemon started
// (connmgr.Stats).
type CMStats = connmgr.Stats

// newCM starts the connection manager of d's config.
func newCM(d *Daemon) (*connmgr.Manager, error) {
	m, err := connmgr.New(connmgr.Config{Host: d.host, HostName: d.cfg.HostName, Logger: d.log.With("part", "cm"), GSI: d.host})
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	return m, nil
}

// CMStats returns the connection manager's counters.
func (d *Daemon) CMStats() CMStats {
	if d.cm == nil {
		return CMStats{}
	}
	return d.cm.Stats()
}
