package daemon

import (
	"fmt"

	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/proto"
)

// Listeners: one port space for the host, requests handed to the
// listening session, and what a session that ends leaves behind.

func (m *cmManager) listen(s *session, req proto.CMListenReq) (uint16, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.session(s)
	if err := checkClientID(req.ID, cs.listeners[req.ID] != nil); err != nil {
		return 0, err
	}
	if len(cs.listeners) >= cmMaxListeners {
		return 0, proto.Errorf(proto.CodeLimit, "this process listens on %d ports already, the most it may", len(cs.listeners))
	}
	backlog := req.Backlog
	switch {
	case backlog == 0:
		backlog = cmDefaultBacklog
	case backlog < 0 || backlog > cmMaxBacklog:
		return 0, proto.Errorf(proto.CodeInvalid, "backlog %d: 1 to %d requests may wait for an answer", backlog, cmMaxBacklog)
	}
	port := req.Port
	if port == 0 {
		p, ok := m.nextEphemeral()
		if !ok {
			return 0, proto.Errorf(proto.CodeLimit, "no port of %d-%d is free", cmEphemeralFirst, cmEphemeralLast)
		}
		port = p
	}
	if other := m.listeners[port]; other != nil {
		inst := "another"
		if i := other.s.instance(); i != nil {
			inst = fmt.Sprintf("instance %s's", i.Name)
		}
		return 0, proto.Errorf(proto.CodeBusy, "port %d is in use: %s listener has it (one port space per host): pick another port, or 0 for a free one", port, inst)
	}
	l := &cmListener{id: req.ID, port: port, s: s, backlog: backlog}
	m.listeners[port] = l
	cs.listeners[req.ID] = l
	return port, nil
}

func (m *cmManager) cancelListen(s *session, id uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.session(s)
	l := cs.listeners[id]
	if l == nil {
		return proto.Errorf(proto.CodeNotFound, "no listener %d on this connection", id)
	}
	m.dropListener(cs, l, "closed")
	return nil
}

// dropListener stops l and rejects the requests it has not answered;
// m.mu is held.
func (m *cmManager) dropListener(cs *cmSession, l *cmListener, why string) {
	delete(cs.listeners, l.id)
	if m.listeners[l.port] == l {
		delete(m.listeners, l.port)
	}
	for _, c := range cs.conns {
		if c.listener != l || c.state != cmReqRcvd {
			continue
		}
		text := fmt.Sprintf("the listener on port %d %s before it answered", l.port, why)
		m.send(c.peer, &cm.REJ{LocalID: c.id, RemoteID: c.remoteID, Reason: cm.RejectInvalidServiceID, Text: text})
		m.remove(c)
		ev := c.event(proto.CMEventRejected)
		ev.Reason, ev.Text = uint16(cm.RejectInvalidServiceID), text
		m.emit(c.s, ev)
	}
}

// closeSession ends what a session that ended had of the connection
// manager: its listeners stop, the requests they have not answered and the
// connections it was setting up are rejected, and its established
// connections are disconnected, so that every peer learns it.
func (m *cmManager) closeSession(s *session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.sessions[s]
	if cs == nil {
		return
	}
	for _, l := range cs.listeners {
		m.dropListener(cs, l, "went away (its process exited)")
	}
	for _, c := range cs.conns {
		switch c.state {
		case cmEstablished:
			m.send(c.peer, &cm.DREQ{LocalID: c.id, RemoteID: c.remoteID})
		case cmDreqSent:
		default:
			reason, text := cm.RejectConsumer, "the process that accepted the request exited"
			if c.active {
				reason, text = cm.RejectTimeout, "the requesting process exited"
			}
			m.send(c.peer, &cm.REJ{LocalID: c.id, RemoteID: c.remoteID, Reason: reason, Text: text})
		}
		m.remove(c)
	}
	delete(m.sessions, s)
}
