package daemon

import (
	"github.com/vrdma/vrdma/internal/proto"
)

// guardReport says how this daemon's switch authenticates daemons and what
// its two listeners between daemons let in and refused (`vrdma switch
// show`): an operator sees a flood or a stranger at the door in numbers.
func (d *Daemon) guardReport() (security string, channel, cm proto.ListenerStats) {
	sw := d.sw
	switch {
	case sw == nil:
	case sw.cfg.Member != nil:
		security = "mutual TLS: daemons are the hosts their certificates of the switch's CA name"
	case sw.cfg.Insecure:
		security = "INSECURE: plaintext, daemons are the hosts their addresses say (--insecure)"
	default:
		security = "loopback only: no certificates, so nothing listens where other hosts reach"
	}
	if sw != nil && sw.tcp != nil {
		st := sw.tcp.Stats()
		channel = proto.ListenerStats{Listen: sw.tcp.ListenAddr().String(), Peers: len(sw.tcp.Peers()),
			Accepted: st.Connects, Refused: st.HandshakeErrors + st.HandshakesRefused + st.PeerLimit, Cut: st.HandshakesCut,
			Unauthorized: st.Unauthorized, WrongPeer: st.WrongPeer, Dropped: st.PeersForgotten}
	}
	if a := d.CMAddr(); a != nil {
		st := d.CMStats()
		cm = proto.ListenerStats{Listen: a.String(), Peers: st.Inbound, Accepted: st.Accepted,
			Refused: st.HandshakeErrors + st.HandshakesRefused, Cut: st.HandshakesCut,
			Unauthorized: st.Unauthorized, WrongPeer: st.WrongPeer, Dropped: st.IdleClosed + st.Evicted}
	}
	return security, channel, cm
}
