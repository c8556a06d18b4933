package daemon

// A verbs link whose device goes away (docs/design/verbs-uplink-faults.md): the device's fatal event, its helper dying or killed, or the
// link deleted. The engine fails the bound instances' QPs (DEVICE_FATAL,
// flushes); the link shows DOWN with the reason until it is added again,
// and the instances bound to it by name move to the new device once they
// hold nothing of the old one.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// errLinkDeleted is the reason the bound instances are told when their
// verbs link is deleted.
var errLinkDeleted = errors.New("the link was deleted (vrdma link del)")

// errDaemonStopping is theirs when the daemon stops.
var errDaemonStopping = errors.New("the vrdma daemon is stopping")

// goneUplinks are the device uplinks of verbs links that went away, by
// link name, until the link is added again: the new device succeeds them.
type goneUplinks struct {
	mu sync.Mutex
	m  map[string][]*engine.DeviceUplink
}

// watchVerbsLink marks the link down with the reason when u's device goes
// away, and makes u the successor of the uplinks a link of the same name
// had before.
func (t *linkTable) watchVerbs(spec proto.LinkSpec, v *verbsLink, u *engine.DeviceUplink) {
	name := spec.Name
	u.SetDownHandler(func(reason error) {
		v.mu.Lock()
		if v.eng == u {
			v.fault = fmt.Errorf("device %s went away: %v; instances bound to %s got IBV_EVENT_DEVICE_FATAL and their QPs are in ERR; "+
				"re-add the link (`vrdma link del %s`, then `vrdma link add %s type verbs dev %s`) and restart their applications", spec.Dev, reason, name, name, name, spec.Dev)
		}
		v.mu.Unlock()
		t.log.Warn("verbs link down", "link", name, "dev", spec.Dev, "reason", reason)
		g := &t.gone
		g.mu.Lock()
		if g.m == nil {
			g.m = map[string][]*engine.DeviceUplink{}
		}
		g.m[name] = append(g.m[name], u)
		g.mu.Unlock()
	})
	g := &t.gone
	g.mu.Lock()
	old := g.m[name]
	delete(g.m, name)
	g.mu.Unlock()
	for _, o := range old {
		o.SetSuccessor(u)
	}
}
