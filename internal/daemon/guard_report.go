package daemon

import (
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/switchagent"
)

// guardReport says how this daemon's switch authenticates daemons and what
// its two listeners between daemons let in and refused (`vrdma switch
// show`), from the agent's status and the connection manager's counters:
// an operator sees a flood or a stranger at the door in numbers.
func (d *Daemon) guardReport(sw switchagent.Status) (security string, channel, cm proto.ListenerStats) {
	security = sw.Security
	if c := sw.Channel; c.Listen != "" {
		st := c.Stats
		channel = proto.ListenerStats{Listen: c.Listen, Peers: c.Peers,
			Accepted: st.Connects, Refused: st.HandshakeErrors + st.HandshakesRefused + st.PeerLimit, Cut: st.HandshakesCut,
			Unauthorized: st.Unauthorized, WrongPeer: st.WrongPeer, Dropped: st.PeersForgotten, Spoofed: st.Spoofed}
	}
	if a := d.CMAddr(); a != nil {
		st := d.CMStats()
		cm = proto.ListenerStats{Listen: a.String(), Peers: st.Inbound, Accepted: st.Accepted,
			Refused: st.HandshakeErrors + st.HandshakesRefused, Cut: st.HandshakesCut,
			Unauthorized: st.Unauthorized + st.WrongSource, WrongPeer: st.WrongPeer, Dropped: st.IdleClosed + st.Evicted}
	}
	return security, channel, cm
}
