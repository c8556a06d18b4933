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
		if ev.Err != nil {
			if a.ctx.Err() == nil {
				a.log.Warn("switch: the watch on hosts ended", "err", ev.Err)
			}
			continue
		}
		if ev.Host.Name == a.hostName {
			a.selfHeal(ev.Host, ev.Type == fabric.HostGone)
		}
		if ev.Type != fabric.HostGone {
			h, err := a.trusted(ev.Host)
			if err != nil {
				// Not as its host wrote it: keep what came before, if anything.
				a.refused.Add(1)
				a.refuseLog.Log(a.log, slog.LevelWarn, "switch: a host record refused", "host", ev.Host.Name, "err", err)
				continue
			}
			ev.Host = h
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
			gids := hostGIDs(ev.Host)
			n := a.host.FailPeers(func(g netip.Addr) bool { return gids[g.As16()] }, fmt.Sprintf("host %s left the switch (its daemon stopped or lost etcd)", ev.Host.Name))
			a.log.Info("host left the switch", "host", ev.Host.Name, "qps_failed", n)
		}
	}
}
