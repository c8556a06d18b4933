package switchagent

// The switch's record of this host's multicast groups
// (docs/design/multicast.md, "The switch's record"): one key per tenant
// and group, under the host's lease, written when a group gets its first
// QP and removed when it loses its last; the lease takes them all when
// the daemon stops.

import (
	"context"
	"time"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fabric"
)

// McastHost is what the agent needs of a daemon whose groups it records
// and whose multicast between hosts carries tenants: the engine's host
// (engine.Host has it all). A Host that is not one does neither.
type McastHost interface {
	McastGroups() []engine.McastGroup
	SetMcastNotify(func())
	// SetSwitchHosts installs the test of the switch's hosts' addresses:
	// their multicast datagrams on RDMA links are dropped, their tagged
	// copies coming on the TCP channel (docs/design/multicast.md).
	SetSwitchHosts(engine.Members)
}

// mcastKey names one record of this host.
type mcastKey struct{ tenant, group string }

// McastChanged wakes the writer of the group records; it never blocks.
func (a *Agent) McastChanged() {
	select {
	case a.mcWake <- struct{}{}:
	default:
	}
}

// followMcast keeps the host's group records what the engine's groups
// are: on each change the engine reports, under each new lease (renew
// wakes it), and a second after a write that failed, until all are
// written. With nothing to write it sleeps (docs/design/idle-daemon.md).
func (a *Agent) followMcast(mh McastHost) {
	defer a.wg.Done()
	defer mh.SetMcastNotify(nil)
	written := map[mcastKey]int{}
	var lease fabric.LeaseID
	for {
		a.regMu.Lock()
		cur := a.sess.Lease()
		a.regMu.Unlock()
		if cur != lease { // a new lease: the old one took the records
			written, lease = map[mcastKey]int{}, cur
		}
		var retry <-chan time.Time
		if !a.syncMcast(mh, written, lease) {
			retry = time.After(time.Second)
		}
		a.mcSyncs.Add(1)
		select {
		case <-a.ctx.Done():
			return
		case <-a.mcWake:
		case <-retry:
		}
	}
}

// syncMcast writes the records that differ from written and deletes those
// of groups that went, updating written with what succeeded. It reports
// whether written is now what the engine has.
func (a *Agent) syncMcast(mh McastHost, written map[mcastKey]int, lease fabric.LeaseID) bool {
	ok := true
	want := map[mcastKey]int{}
	for _, g := range mh.McastGroups() {
		want[mcastKey{g.Scope, engine.GroupAddr(g.MGID).String()}] = g.QPs
	}
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	for k, n := range want {
		if written[k] == n {
			continue
		}
		err := a.fab.PutMcastGroup(ctx, fabric.McastGroup{Host: a.hostName, Tenant: k.tenant, Group: k.group, QPs: n}, lease)
		if err != nil {
			if a.ctx.Err() == nil {
				a.log.Warn("could not record a multicast group on the switch", "group", k.group, "tenant", k.tenant, "err", err)
			}
			ok = false
			continue
		}
		written[k] = n
	}
	for k := range written {
		if _, ok := want[k]; ok {
			continue
		}
		if err := a.fab.DeleteMcastGroup(ctx, a.hostName, k.tenant, k.group); err != nil {
			if a.ctx.Err() == nil {
				a.log.Warn("could not remove a multicast group from the switch", "group", k.group, "tenant", k.tenant, "err", err)
			}
			ok = false
			continue
		}
		delete(written, k)
	}
	return ok
}
