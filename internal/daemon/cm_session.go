package daemon

import (
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// cmSession is a session as the connection manager sees it
// (connmgr.Session): the same session, with the methods the manager calls.
// Every conversion of one session gives the same key in the manager's
// maps.
type cmSession session

// cm returns s as the connection manager sees it.
func (s *session) cm() *cmSession { return (*cmSession)(s) }

// Adapter is the adapter the session opened.
func (c *cmSession) Adapter() *engine.Adapter { return c.adapter }

// InstanceFor names the session's instance to asker if asker may see it
// (`vm show` would list it to asker: its owner's, the administrators',
// everyone's for the default instance), and "" otherwise.
func (c *cmSession) InstanceFor(asker connmgr.Session) string {
	inst := (*session)(c).instance()
	a, ok := asker.(*cmSession)
	if inst == nil || !ok || !c.d.access.maySee(a.cred, inst) {
		return ""
	}
	return shownName(a.cred, inst.Name)
}

// Emit queues ev for the session's event sender.
func (c *cmSession) Emit(ev proto.CMEvent) { c.cmOut.push(ev) }

// Lagging reports whether the session's client has stopped reading its
// events (cm_events.go).
func (c *cmSession) Lagging() bool { return c.cmOut.lagging() }

// Charge takes one listener or connection from the session's uid's and
// instance's limits (cmlisten, cmconn).
func (c *cmSession) Charge(r connmgr.Resource) error {
	return (*session)(c).take(cmResource(r), 1)
}

// Uncharge gives back a listener at once, and a connection once the
// events queued before its end are delivered (cm_events.go).
func (c *cmSession) Uncharge(r connmgr.Resource) {
	s := (*session)(c)
	if r == connmgr.Connections {
		s.cmOut.uncharge(s.giveCMConns)
		return
	}
	s.give(cmResource(r), 1)
}

// cmResource is the daemon's resource for the manager's.
func cmResource(r connmgr.Resource) Resource {
	if r == connmgr.Listeners {
		return CMListeners
	}
	return CMConns
}

// QP returns the session's QP with handle h; c.mu is held.
func (c *cmSession) QP(h uint32) (*engine.QP, error) { return lookup(c.qps, h, "queue pair") }

// Lock takes the session's lock, which guards its QPs.
func (c *cmSession) Lock() { c.mu.Lock() }

// Unlock releases the session's lock.
func (c *cmSession) Unlock() { c.mu.Unlock() }
