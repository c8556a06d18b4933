package switchagent

import (
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/tcplink"
)

// Status is the agent's own state, for `vrdma switch show`; the switch's
// records (hosts, port groups, instances, the subnet manager) are read
// through Fabric.
type Status struct {
	Name      string
	Embedded  bool     // the daemon runs the switch's etcd member
	Endpoints []string // etcd's (Endpoints)
	// Role is this host's in the subnet manager's election, or "none
	// (standing again after a lost lease)" while it has no candidacy.
	Role string
	// SMReport is the subnet manager's last report when this host is it.
	SMReport string
	// Fallbacks counts the connections (and UD datagrams) that took the
	// TCP channel, each logged once per host and route table.
	Fallbacks uint64
	HostsGone uint64 // hosts seen leaving the switch
	LeaseLost uint64 // times this host's lease ended under it
	// Security says how the switch's daemons authenticate each other.
	Security string
	Channel  ChannelStatus
}

// ChannelStatus is the TCP channel's listener.
type ChannelStatus struct {
	Listen string // the address it listens on
	Peers  int    // daemons it has a connection with
	Stats  tcplink.Stats
}

// Status returns the agent's state now.
func (a *Agent) Status() Status {
	st := Status{Name: a.cfg.Name, Embedded: a.Embedded(), Endpoints: a.Endpoints(),
		Fallbacks: a.fallbck.Load(), HostsGone: a.gone.Load(), LeaseLost: a.leaseLost.Load(), Security: a.security()}
	st.Role = "none (standing again after a lost lease)"
	if cand := a.candidacy(); cand != nil {
		st.Role = cand.Role().String()
		if cand.Role() == fabric.Leader {
			st.SMReport = cand.LastReport().String()
		}
	}
	if a.tcp != nil {
		st.Channel = ChannelStatus{Listen: a.tcp.ListenAddr().String(), Peers: len(a.tcp.Peers()), Stats: a.tcp.Stats()}
	}
	return st
}

// security says how this switch's daemons authenticate each other.
func (a *Agent) security() string {
	switch {
	case a.cfg.Member != nil:
		return "mutual TLS: daemons are the hosts their certificates of the switch's CA name"
	case a.cfg.Insecure:
		return "INSECURE: plaintext, daemons are the hosts their addresses say (--insecure)"
	}
	return "loopback only: no certificates, so nothing listens where other hosts reach"
}
