package daemon

import (
	"github.com/vrdma/vrdma/internal/switchagent"
	"github.com/vrdma/vrdma/switchview"
)

// guardReport says how this daemon's switch authenticates daemons and what
// its listener between daemons, the TCP channel's, let in and refused
// (`vrdma switch show`), from the agent's status: an operator sees a flood
// or a stranger at the door in numbers.
func guardReport(sw switchagent.Status) (security string, channel switchview.ListenerStats) {
	security = sw.Security
	if c := sw.Channel; c.Listen != "" {
		st := c.Stats
		channel = switchview.ListenerStats{Listen: c.Listen, Peers: c.Peers,
			Accepted: st.Connects, Refused: st.HandshakeErrors + st.HandshakesRefused + st.PeerLimit, Cut: st.HandshakesCut,
			Unauthorized: st.Unauthorized, WrongPeer: st.WrongPeer, Dropped: st.PeersForgotten, Spoofed: st.Spoofed}
	}
	return security, channel
}
