package connmgr

import (
	"fmt"

	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/proto"
)

// handle runs a message that came from p. State changes happen under m.mu;
// what needs a session's lock (a QP to the error state) runs after, in
// order with the events that report it.
func (m *Manager) handle(p *peer, msg cm.Message) {
	var after []func()
	m.mu.Lock()
	if !m.closed {
		switch v := msg.(type) {
		case *cm.REQ:
			m.onREQ(p, v)
		case *cm.REP:
			m.onREP(p, v)
		case *cm.RTU:
			m.onRTU(p, v)
		case *cm.REJ:
			after = m.onREJ(p, v)
		case *cm.DREQ:
			after = m.onDREQ(p, v)
		case *cm.DREP:
			m.onDREP(p, v)
		}
	}
	m.mu.Unlock()
	for _, f := range after {
		f()
	}
}

// connFor finds the connection a message from p is for: by this side's id
// (which must have been given to p, and the sender must be the peer it
// knows), or for a REJ naming only the sender's id, by that.
func (m *Manager) connFor(p *peer, msg cm.Message) *connection {
	local, remote := msg.IDs()
	if remote == 0 {
		return m.remote[remoteKey{p, local}]
	}
	c := m.conns[remote]
	if c == nil || c.peer != p {
		return nil
	}
	if c.remoteID != 0 && local != c.remoteID && (local != 0 || msg.Type() != cm.TypeREJ) {
		return nil
	}
	return c
}

func (m *Manager) onREQ(p *peer, r *cm.REQ) {
	if m.remote[remoteKey{p, r.LocalID}] != nil {
		return // a request this daemon has already
	}
	reject := func(reason cm.Reason, format string, args ...any) {
		m.send(p, &cm.REJ{RemoteID: r.LocalID, Reason: reason, Text: fmt.Sprintf(format, args...)})
	}
	if why := m.wrongSource(p, r.SrcGID); why != "" {
		m.adm.wrongSource.Add(1)
		m.refused("connection manager: refused a request from a source its sender does not own", "peer", p.name, "identity", p.ident,
			"source", gidString(r.SrcGID))
		reject(cm.RejectInvalidGID, "%s", why)
		return
	}
	l := m.listeners[r.DstPort]
	switch {
	case l == nil:
		reject(cm.RejectInvalidServiceID, "no listener on port %d", r.DstPort)
		return
	case !m.host.IsLocalGID(r.DstGID):
		reject(cm.RejectInvalidGID, "%s is not the address of an adapter on host %s", gidString(r.DstGID), m.hostName)
		return
	case l.pending >= l.backlog:
		reject(cm.RejectNoResources, "the listener on port %d has %d requests waiting for an answer, its backlog: try again later", r.DstPort, l.pending)
		return
	case l.s.Lagging():
		m.adm.lagging.Add(1)
		reject(cm.RejectNoResources, "the listener on port %d is not reading its events (receiver not ready): try again later", r.DstPort)
		return
	}
	sp := m.session(l.s)
	if len(sp.conns) >= maxConns {
		reject(cm.RejectNoResources, "the listener on port %d has %d connections, the most one process may have", r.DstPort, len(sp.conns))
		return
	}
	if err := l.s.Charge(Connections); err != nil {
		m.adm.overLimit.Add(1)
		reject(cm.RejectNoResources, "the listener on port %d may have no more connections (its owner's limit): try again later", r.DstPort)
		return
	}
	a := l.s.Adapter()
	c := &connection{s: l.s, state: reqRcvd, peer: p, remoteID: r.LocalID, listener: l, timeout: timeoutOf(r.TimeoutMillis),
		qpType: r.QPType, localPort: r.DstPort, remoteGID: r.SrcGID, remotePort: r.SrcPort,
		mtu: min(r.MTU, uint8(a.PortMTU()))}
	c.sgidIndex, c.localGID = responderGID(a, r.DstGID, r.SrcGID)
	id := sp.nextID
	for sp.conns[id] != nil || id < proto.CMDaemonIDBase {
		id++
		if id < proto.CMDaemonIDBase {
			id = proto.CMDaemonIDBase
		}
	}
	sp.nextID = id + 1
	m.add(c, id)
	l.pending++
	m.arm(c, c.timeout)
	ev := c.event(proto.CMEventRequest)
	ev.Listener, ev.QPType, ev.GID, ev.QPN, ev.PSN = l.id, r.QPType, r.SrcGID[:], r.QPN, r.PSN
	ev.MTU, ev.RdAtomic, ev.SGIDIndex = c.mtu, min(r.ResponderResources, r.InitiatorDepth), c.sgidIndex
	ev.LocalAddr, ev.LocalPort, ev.RemoteAddr, ev.RemotePort = r.DstGID[:], r.DstPort, r.SrcGID[:], r.SrcPort
	ev.PrivateData = r.PrivateData
	l.s.Emit(ev)
}

// wrongSource says why a request from p may not come from src, or "" if
// it may. Only with Config.Authorize, which names the daemon behind
// every connection: the daemon at the other end of a TCP connection
// speaks for its own host's addresses, never for this host's, and with
// Config.PeerOwns only for the addresses the switch gives its host. The
// in-process peer is this daemon.
func (m *Manager) wrongSource(p *peer, src [16]byte) string {
	if p.local || m.adm.authorize == nil {
		return ""
	}
	if m.host.IsLocalGID(src) {
		return fmt.Sprintf("source %s is an address of host %s: a request from another daemon cannot come from it", gidString(src), m.hostName)
	}
	if m.peerOwns != nil && !m.peerOwns(p.ident, src) {
		return fmt.Sprintf("source %s is not an address of host %s, which sent the request", gidString(src), p.ident)
	}
	return ""
}

func (m *Manager) onREP(p *peer, r *cm.REP) {
	c := m.connFor(p, r)
	if c == nil {
		m.send(p, &cm.REJ{RemoteID: r.LocalID, Reason: cm.RejectInvalidCommID,
			Text: fmt.Sprintf("no request %#x waits for a reply here: it timed out or was cancelled", r.RemoteID)})
		return
	}
	if !c.active || c.state != reqSent {
		return // a second reply: the first one counts
	}
	if r.MTU > c.mtu {
		m.send(p, &cm.REJ{LocalID: c.id, RemoteID: r.LocalID, Reason: cm.RejectInvalidMTU,
			Text: fmt.Sprintf("path MTU %d is above the requester's %d", r.MTU, c.mtu)})
		m.remove(c)
		ev := c.event(proto.CMEventRejected)
		ev.Reason, ev.Text = uint16(cm.RejectInvalidMTU), fmt.Sprintf("the reply chose MTU %d, above this port's %d", r.MTU, c.mtu)
		c.s.Emit(ev)
		return
	}
	m.setRemote(c, r.LocalID)
	m.to(c, repRcvd)
	c.mtu = r.MTU
	m.arm(c, c.timeout)
	ev := c.event(proto.CMEventReply)
	ev.QPType, ev.GID, ev.QPN, ev.PSN, ev.MTU = c.qpType, r.GID[:], r.QPN, r.PSN, r.MTU
	ev.RdAtomic, ev.SGIDIndex = min(r.ResponderResources, r.InitiatorDepth), c.sgidIndex
	ev.PrivateData = r.PrivateData
	c.s.Emit(ev)
}

func (m *Manager) onRTU(p *peer, r *cm.RTU) {
	c := m.connFor(p, r)
	if c == nil {
		m.send(p, &cm.REJ{RemoteID: r.LocalID, Reason: cm.RejectInvalidCommID,
			Text: fmt.Sprintf("connection %#x does not wait for a confirmation here: it timed out or was rejected", r.RemoteID)})
		return
	}
	if c.active || c.state != repSent {
		return
	}
	m.to(c, established)
	ev := c.event(proto.CMEventEstablished)
	ev.PrivateData = r.PrivateData
	c.s.Emit(ev)
}

func (m *Manager) onREJ(p *peer, r *cm.REJ) []func() {
	c := m.connFor(p, r)
	if c == nil {
		return nil // never answer a REJ: two daemons would bounce them for ever
	}
	st := c.state
	m.remove(c)
	ev := c.event(proto.CMEventRejected)
	ev.Reason, ev.Text, ev.PrivateData = uint16(r.Reason), r.Text, r.PrivateData
	switch st {
	case repSent:
		return []func(){func() { errQP(c); c.s.Emit(ev) }}
	case established:
		ev.Type = proto.CMEventDisconnected
		return []func(){func() { errQP(c); c.s.Emit(ev) }}
	case dreqSent:
		ev.Type = proto.CMEventDisconnectDone
	}
	c.s.Emit(ev)
	return nil
}

func (m *Manager) onDREQ(p *peer, r *cm.DREQ) []func() {
	c := m.connFor(p, r)
	// The answer goes even for a connection that is gone here: the DREP
	// of an earlier DREQ may have been lost with a connection.
	m.send(p, &cm.DREP{LocalID: r.RemoteID, RemoteID: r.LocalID})
	if c == nil {
		return nil
	}
	switch c.state {
	case established, repSent:
		m.remove(c)
		ev := c.event(proto.CMEventDisconnected)
		ev.PrivateData = r.PrivateData
		return []func(){func() { errQP(c); c.s.Emit(ev) }}
	case dreqSent: // both sides disconnect at once
		m.remove(c)
		c.s.Emit(c.event(proto.CMEventDisconnectDone))
	}
	return nil
}

func (m *Manager) onDREP(p *peer, r *cm.DREP) {
	c := m.connFor(p, r)
	if c == nil || c.state != dreqSent {
		return
	}
	m.remove(c)
	ev := c.event(proto.CMEventDisconnectDone)
	ev.PrivateData = r.PrivateData
	c.s.Emit(ev)
}

// expire runs when c's timer fires in the state it was armed in.
func (m *Manager) expire(c *connection, gen uint32) {
	var after func()
	m.mu.Lock()
	if m.closed || m.conns[c.id] != c || c.gen != gen {
		m.mu.Unlock()
		return
	}
	ev := c.event(proto.CMEventTimeout)
	ev.Reason = uint16(cm.RejectTimeout)
	rej := &cm.REJ{LocalID: c.id, RemoteID: c.remoteID, Reason: cm.RejectTimeout}
	switch c.state {
	case reqSent:
		rej.Text = fmt.Sprintf("the requester got no reply within %v and gave up", c.timeout)
		ev.Text = fmt.Sprintf("no reply within %v", c.timeout)
	case repRcvd:
		rej.Text = fmt.Sprintf("the requester did not connect its QP within %v", c.timeout)
		ev.Text = fmt.Sprintf("the QP was not connected and confirmed within %v of the reply", c.timeout)
	case reqRcvd:
		rej.Text = fmt.Sprintf("the listener on port %d did not answer within %v", c.localPort, c.timeout)
		ev.Text = fmt.Sprintf("the request was not answered within %v: the requester gave up", c.timeout)
	case repSent:
		rej.Text = fmt.Sprintf("no confirmation (RTU) of the reply within %v", c.timeout)
		ev.Text = rej.Text
		after = func() { errQP(c) }
	case dreqSent:
		rej = nil
		ev = c.event(proto.CMEventDisconnectDone)
		ev.Text = fmt.Sprintf("the peer did not answer the disconnection within %v", c.timeout)
	}
	if rej != nil {
		m.send(c.peer, rej)
	}
	m.remove(c)
	if after == nil {
		c.s.Emit(ev)
	}
	m.mu.Unlock()
	if after != nil {
		after()
		c.s.Emit(ev)
	}
}

// peerGone fails the connections being set up through p, whose connection
// ended. Established connections stay: their QPs do not need it; only a
// later disconnect cannot tell the peer.
func (m *Manager) peerGone(p *peer, err error) {
	var after []func()
	m.mu.Lock()
	defer func() {
		m.mu.Unlock()
		for _, f := range after {
			f()
		}
	}()
	if m.closed {
		return
	}
	if m.peers[p.endpoint] == p {
		delete(m.peers, p.endpoint)
	}
	delete(m.inbound, p)
	for _, c := range m.conns {
		if c.peer != p {
			continue
		}
		switch c.state {
		case established:
			k := remoteKey{p, c.remoteID}
			if m.remote[k] == c {
				delete(m.remote, k)
			}
			c.peer = nil
			continue
		case dreqSent:
			m.remove(c)
			ev := c.event(proto.CMEventDisconnectDone)
			ev.Text = fmt.Sprintf("the connection to the peer's connection manager ended before it answered: %v", err)
			c.s.Emit(ev)
			continue
		}
		st := c.state
		m.remove(c)
		ev := c.event(proto.CMEventUnreachable)
		ev.Text = clip(fmt.Sprintf("lost the connection to the connection manager at %s: %v", p.name, err))
		if st == repSent {
			after = append(after, func() { errQP(c); c.s.Emit(ev) })
			continue
		}
		c.s.Emit(ev)
	}
}
