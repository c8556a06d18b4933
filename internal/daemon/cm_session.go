package daemon

import (
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

// Instance names the session's instance ("" if none).
func (c *cmSession) Instance() string {
	if i := (*session)(c).instance(); i != nil {
		return i.Name
	}
	return ""
}

// Emit queues ev for the session's event sender.
func (c *cmSession) Emit(ev proto.CMEvent) { c.cmOut.push(ev) }

// QP returns the session's QP with handle h; c.mu is held.
func (c *cmSession) QP(h uint32) (*engine.QP, error) { return lookup(c.qps, h, "queue pair") }

// Lock takes the session's lock, which guards its QPs.
func (c *cmSession) Lock() { c.mu.Lock() }

// Unlock releases the session's lock.
func (c *cmSession) Unlock() { c.mu.Unlock() }
