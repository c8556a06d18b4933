package connmgr

import (
	"fmt"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

// ports is the sessions' side of the connection manager: their listeners
// on the host's one port space, and the ids of what they hold.
type ports struct {
	*core
	ephemeral uint16 // the next port nextEphemeral tries
}

// Listeners: one port space for the host, requests handed to the
// listening session, and what a session that ends leaves behind.

// Listen starts listening for s on req.Port (0: a free port of the
// ephemeral range) under the library's id req.ID, and returns the port.
// Requests for it reach s as CMEventRequest events. The session's lock is
// held.
func (m *ports) Listen(s Session, req proto.CMListenReq) (uint16, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.ports.session(s)
	if err := checkClientID(req.ID, sp.listeners[req.ID] != nil); err != nil {
		return 0, err
	}
	if len(sp.listeners) >= maxListeners {
		return 0, proto.Errorf(proto.CodeLimit, "this process listens on %d ports already, the most it may", len(sp.listeners))
	}
	backlog := req.Backlog
	switch {
	case backlog == 0:
		backlog = defaultBacklog
	case backlog < 0 || backlog > maxBacklog:
		return 0, proto.Errorf(proto.CodeInvalid, "backlog %d: 1 to %d requests may wait for an answer", backlog, maxBacklog)
	}
	port := req.Port
	if port == 0 {
		p, ok := m.ports.nextEphemeral()
		if !ok {
			return 0, proto.Errorf(proto.CodeLimit, "no port of %d-%d is free", ephemeralFirst, ephemeralLast)
		}
		port = p
	}
	if other := m.listeners[port]; other != nil {
		// Another tenant's instance is named to its owner and the
		// administrators only, as the daemon lists it.
		inst := "another"
		if name := other.s.InstanceFor(s); name != "" {
			inst = fmt.Sprintf("instance %s's", name)
		}
		return 0, proto.Errorf(proto.CodeBusy, "port %d is in use: %s listener has it (one port space per host): pick another port, or 0 for a free one", port, inst)
	}
	if err := s.Charge(Listeners); err != nil {
		return 0, err
	}
	l := &listener{id: req.ID, port: port, s: s, backlog: backlog}
	m.listeners[port] = l
	sp.listeners[req.ID] = l
	return port, nil
}

// CancelListen stops s's listener id and rejects the requests it has not
// answered. The session's lock is held.
func (m *ports) CancelListen(s Session, id uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.ports.session(s)
	l := sp.listeners[id]
	if l == nil {
		return proto.Errorf(proto.CodeNotFound, "no listener %d on this connection", id)
	}
	m.ports.dropListener(sp, l, "closed")
	return nil
}

// dropListener stops l and rejects the requests it has not answered;
// m.mu is held.
func (m *ports) dropListener(sp *sessionPart, l *listener, why string) {
	delete(sp.listeners, l.id)
	if m.listeners[l.port] == l {
		delete(m.listeners, l.port)
	}
	l.s.Uncharge(Listeners)
	for _, c := range sp.conns {
		if c.listener != l || c.state != reqRcvd {
			continue
		}
		text := fmt.Sprintf("the listener on port %d %s before it answered", l.port, why)
		if c.qpType == uint8(abi.QPTypeUD) {
			m.cmds.rejectUD(c, ibcm.SIDRNoService, nil)
			ev := c.event(proto.CMEventRejected)
			ev.Reason, ev.Text = uint16(cm.RejectInvalidServiceID), text
			c.tell(ev)
			continue
		}
		m.retr.send(c.peer, c.via(m.core), &cm.REJ{LocalID: c.id, RemoteID: c.remoteID, Reason: cm.RejectInvalidServiceID, Text: text})
		m.book.remove(c)
		ev := c.event(proto.CMEventRejected)
		ev.Reason, ev.Text = uint16(cm.RejectInvalidServiceID), text
		c.tell(ev)
	}
}

// CloseSession ends what a session that ended had of the connection
// manager: its listeners stop, the requests they have not answered and
// the connections it was setting up are rejected, and its established
// connections are disconnected, so that every peer learns it. The daemon
// calls it once the session has stopped serving commands, without its
// lock.
func (m *ports) CloseSession(s Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.sessions[s]
	if sp == nil {
		return
	}
	for _, l := range sp.listeners {
		m.ports.dropListener(sp, l, "went away (its process exited)")
	}
	for _, c := range sp.conns {
		if c.qpType == uint8(abi.QPTypeUD) {
			m.cmds.rejectUD(c, ibcm.SIDRRejected, nil)
			continue
		}
		switch c.state {
		case established:
			if c.peer != nil && c.peer.gsi {
				// Over MADs a DREQ may be lost: it goes on, sent again
				// until answered, after the session.
				c.orphan, c.qp = true, nil
				if !c.removed {
					c.removed = true
					c.s.Uncharge(Connections)
				}
				m.book.to(c, dreqSent)
				m.retr.sendConn(c, &cm.DREQ{LocalID: c.id, RemoteID: c.remoteID}, true)
				continue
			}
			m.retr.send(c.peer, c.via(m.core), &cm.DREQ{LocalID: c.id, RemoteID: c.remoteID})
		case dreqSent:
		default:
			reason, text := cm.RejectConsumer, "the process that accepted the request exited"
			if c.active {
				reason, text = cm.RejectTimeout, "the requesting process exited"
			}
			m.retr.send(c.peer, c.via(m.core), &cm.REJ{LocalID: c.id, RemoteID: c.remoteID, Reason: reason, Text: text})
		}
		m.book.remove(c)
	}
	delete(m.sessions, s)
}

// session returns s's part, creating it; m.mu is held.
func (m *ports) session(s Session) *sessionPart {
	sp := m.sessions[s]
	if sp == nil {
		sp = &sessionPart{listeners: map[uint32]*listener{}, conns: map[uint32]*connection{}, nextID: proto.CMDaemonIDBase}
		m.sessions[s] = sp
	}
	return sp
}

// nextEphemeral returns a port no listener has, from the ephemeral range:
// for a listener that asked for port 0, and for the requester's side of a
// connection (where it is informational: it names the connection to the
// peer, as rdma_cm's source port does).
func (m *ports) nextEphemeral() (uint16, bool) {
	for i := 0; i <= ephemeralLast-ephemeralFirst; i++ {
		p := m.ephemeral
		m.ephemeral++
		if m.ephemeral > ephemeralLast {
			m.ephemeral = ephemeralFirst
		}
		if m.listeners[p] == nil {
			return p, true
		}
	}
	return 0, false
}
