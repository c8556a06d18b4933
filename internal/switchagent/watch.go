package switchagent

import (
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/vrdma/vrdma/internal/fabric"
)

// followHosts keeps the host table and the routes current, and fails the
// QPs of hosts that left.
func (a *Agent) followHosts(ch <-chan fabric.HostEvent) {
	defer a.wg.Done()
	for ev := range ch {
		if ev.Err != nil && ev.Type != fabric.HostRefused {
			if a.ctx.Err() == nil {
				a.log.Warn("switch: the watch on hosts ended", "err", ev.Err)
			}
			continue
		}
		// The watch takes only records this daemon trusts (Join gives it
		// recordTrust): the others come as HostRefused, and every event's
		// record is one this daemon took.
		switch ev.Type {
		case fabric.HostRefused:
			a.refused.Add(1)
			a.refuseLog.Log(a.log, slog.LevelWarn, "switch: a host record refused", "host", ev.Host.Name, "err", ev.Err)
			if ev.Host.Name == a.hostName {
				a.selfHeal("a record under this host's name that it did not write")
			}
			continue
		case fabric.HostRemoved:
			if ev.Host.Name == a.hostName {
				a.selfHeal("this host's record was deleted")
			}
			continue
		case fabric.HostUpdated, fabric.HostJoined:
			if ev.Host.Name == a.hostName && !a.wroteLast(ev.Host) {
				a.selfHeal("an older record of this host was put back")
			}
		}
		// What a host that leaves takes with it: its proven addresses and
		// the others that routed to it (a link-local GID another host
		// claims too routes to neither: its QPs are not this host's).
		gids := a.provenGIDs(ev.Host)
		for g, pr := range a.routes.Load().byGID {
			if pr.host == ev.Host.Name {
				gids[g] = true
			}
		}
		a.mu.Lock()
		switch ev.Type {
		case fabric.HostJoined, fabric.HostUpdated:
			a.hosts[ev.Host.Name] = ev.Host
		case fabric.HostGone:
			if cur, ok := a.hosts[ev.Host.Name]; ok && cur.Identity.SameHost(ev.Host.Identity) {
				delete(a.hosts, ev.Host.Name)
			}
		}
		a.rebuildLocked()
		a.mu.Unlock()
		if ev.Type == fabric.HostGone && ev.Host.Name != a.hostName {
			a.gone.Add(1)
			n := a.host.FailPeers(func(g netip.Addr) bool { return gids[g.As16()] }, fmt.Sprintf("host %s left the switch (its daemon stopped or lost etcd)", ev.Host.Name))
			a.log.Info("host left the switch", "host", ev.Host.Name, "qps_failed", n)
		}
	}
}
