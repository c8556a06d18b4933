package daemon

// The daemon's side of the switch agent (package switchagent): the agent
// built from Config.Switch, the daemon as the agent sees it (switchHost),
// and the calls the daemon makes when its links and instances change.
// The commands are in cmd_switch.go, where the listeners listen in
// listen_policy.go. docs/design/path-routing.md says how the agent routes.

import (
	"log/slog"
	"net/netip"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/switchagent"
)

// switchMember is the daemon's part in the distributed switch: its agent
// (nil when the daemon is on no switch), through which it checks a new
// instance against the switch, publishes and withdraws its instances,
// lists other hosts' and tells the switch its links changed. insts and
// lids are the daemon's instances and their LIDs, hostName its host's
// name on the switch.
type switchMember struct {
	agent    *switchagent.Agent
	hostName string
	log      *slog.Logger
	insts    *instanceTable
	lids     *lidTable
}

// DefaultSwitch is the name of the switch a daemon joins unless told
// otherwise.
const DefaultSwitch = switchagent.DefaultSwitch

// DefaultPortGroup is the port group every switch has and adapters join
// unless told otherwise.
const DefaultPortGroup = switchagent.DefaultPortGroup

// TCPLinkName is the name of the TCP channel's link.
const TCPLinkName = switchagent.TCPLinkName

// SwitchConfig says how a daemon joins the distributed switch
// (switchagent.Config). The zero value joins none: the daemon then serves
// its own host only (memcpy, and RoCEv2 to peers addressed by hand).
type SwitchConfig = switchagent.Config

// ErrNotAHost is the error of a connection between daemons from no live
// host of the switch (switchagent.ErrNotAHost).
var ErrNotAHost = switchagent.ErrNotAHost

// newAgent makes the switch agent of d's config (Config.Switch, its
// defaults filled in by the listen policy). The agent joins later
// (joinSwitch).
func newAgent(d *Daemon) (*switchagent.Agent, error) {
	a, err := switchagent.New(d.cfg.Switch, switchagent.Local{HostName: d.cfg.HostName, StateDir: d.cfg.StateDir,
		Host: switchHost{d}, Logger: d.log})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// join joins the switch, publishes the daemon's instances and waits
// (a while) for their LIDs.
func (m *switchMember) join() error {
	if err := m.agent.Join(); err != nil {
		return err
	}
	m.publishAll()
	insts := m.insts.all()
	m.lids.awaitSwitch(insts...)
	return nil
}

// SwitchEndpoints returns the etcd endpoints the daemon's switch lives on
// (its embedded member's, or those it joined); nil on no switch.
func (d *Daemon) SwitchEndpoints() []string {
	if d.sw.agent == nil {
		return nil
	}
	return d.sw.agent.Endpoints()
}

// linksChanged publishes the host's uplinks after `vrdma link add|delete`.
func (m *switchMember) linksChanged() {
	if m.agent != nil {
		m.agent.LinksChanged()
	}
}

// switchHost is the daemon as its switch agent sees it.
type switchHost struct{ d *Daemon }

func (h switchHost) SetRouter(r engine.Router) { h.d.host.SetRouter(r) }

func (h switchHost) SetMembers(m engine.Members) { h.d.host.SetMembers(m) }

func (h switchHost) FailPeers(gone func(netip.Addr) bool, reason string) int {
	return h.d.host.FailPeers(gone, reason)
}

func (h switchHost) AttachLink(l engine.Link) error { return h.d.AttachLink(l) }

func (h switchHost) RemoveLink(name string) error { return h.d.host.RemoveLink(name) }

func (h switchHost) LIDsChanged() { h.d.lids.switchChanged() }

// McastGroups and SetMcastNotify let the agent record the host's
// multicast groups on the switch (switchagent.McastHost).
func (h switchHost) McastGroups() []engine.McastGroup { return h.d.host.McastGroups() }

func (h switchHost) SetMcastNotify(f func()) { h.d.host.SetMcastNotify(f) }

func (h switchHost) SetSwitchHosts(f engine.Members) { h.d.host.SetSwitchHosts(f) }

// Uplinks lists the daemon's links (cmd_link.go) under their lock, which
// the agent takes holding its own: the daemon never calls the agent
// holding the links' lock.
func (h switchHost) Uplinks() []switchagent.Uplink {
	t := &h.d.links
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]switchagent.Uplink, 0, len(t.m))
	for name, e := range t.m {
		u := switchagent.Uplink{Name: name}
		if e.l != nil {
			u.Link = e.l
		}
		if e.spec.Type == verbsLinkType {
			u.Verbs = e.verbs.uplink(e.spec)
		}
		out = append(out, u)
	}
	return out
}
