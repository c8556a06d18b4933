package connmgr

import "fmt"

// Resource is what the manager charges a session's tenant for, through
// Session.Charge: the daemon counts it against the tenant's limits, so
// that what one tenant makes the manager hold is bounded by its quota.
type Resource uint8

const (
	// Listeners are ports listened on, of the host's one port space.
	Listeners Resource = iota + 1
	// Connections are connections and requests, sent or received, from
	// their creation until the manager forgets them (Session.Uncharge
	// says how long the session may keep the charge after that).
	Connections
)

func (r Resource) String() string {
	switch r {
	case Listeners:
		return "listeners"
	case Connections:
		return "connections"
	}
	return fmt.Sprintf("resource(%d)", uint8(r))
}
