package connmgr

import (
	"fmt"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

// peerMessages runs what peers send (the in-process peer, and other hosts'
// CMs over MADs): the IBTA CM state machine of the responder and of the
// requester, and SIDR (sidr.go).
type peerMessages struct{ *core }

// handle runs a message that came from p (with v over MADs, else nil).
// State changes happen under m.mu; what needs a session's lock (a QP to
// the error state) runs after, in order with the events that report it.
func (m *peerMessages) handle(p *peer, v *via, msg cm.Message) {
	var after []func()
	m.mu.Lock()
	if !m.closed {
		switch r := msg.(type) {
		case *cm.REQ:
			m.msgs.onREQ(p, v, r)
		case *cm.REP:
			m.msgs.onREP(p, v, r)
		case *cm.RTU:
			m.msgs.onRTU(p, v, r)
		case *cm.REJ:
			after = m.msgs.onREJ(p, v, r)
		case *cm.DREQ:
			after = m.msgs.onDREQ(p, v, r)
		case *cm.DREP:
			m.msgs.onDREP(p, v, r)
		case *mra:
			m.retr.onMRA(p, v, r)
		case *sidrReq:
			m.msgs.onSIDRReq(p, v, r)
		case *sidrRep:
			m.msgs.onSIDRRep(p, v, r)
		}
	}
	m.mu.Unlock()
	for _, f := range after {
		f()
	}
}

// answer sends msg to the sender of a message that came from p with v,
// for no connection of this side; m.mu is held.
func (m *peerMessages) answer(p *peer, v *via, msg cm.Message, rejected uint8) {
	var out *via
	if v != nil {
		out = v.reply(0)
		out.rejected = rejected
	}
	m.retr.send(p, out, msg)
}

// connFor finds the connection a message from p is for: by this side's id
// (which must have been given to p, and the sender must be the peer it
// knows: over MADs, the GID it is connected to), or for a REJ naming only
// the sender's id, by that.
func (m *connBook) connFor(p *peer, v *via, msg cm.Message) *connection {
	local, remote := msg.IDs()
	if remote == 0 {
		k := remoteKey{p: p, id: local}
		if p.gsi && v != nil {
			k.gid = v.src
		}
		return m.remote[k]
	}
	c := m.conns[remote]
	if c == nil || c.peer != p || (p.gsi && v != nil && v.src != c.remoteGID) {
		return nil
	}
	if c.remoteID != 0 && local != c.remoteID && (local != 0 || msg.Type() != cm.TypeREJ) {
		return nil
	}
	return c
}

func (m *peerMessages) onREQ(p *peer, v *via, r *cm.REQ) {
	k := remoteKey{p: p, id: r.LocalID}
	if p.gsi && v != nil {
		k.gid = v.src
	}
	if c := m.remote[k]; c != nil {
		// A request this daemon has already: its REQ came again because
		// the answer was lost or is slow. The REP again if one was sent,
		// an MRA while the listener has not answered.
		if !p.gsi {
			return
		}
		switch duplicateREQ(c.state) { // rules.go
		case answerMRA:
			m.retr.sendMRA(c)
		case answerResend:
			m.retr.resend(c)
		default:
			m.mads.duplicates.Add(1)
		}
		return
	}
	reject := func(reason cm.Reason, format string, args ...any) {
		m.msgs.answer(p, v, &cm.REJ{RemoteID: r.LocalID, Reason: reason, Text: fmt.Sprintf(format, args...)}, ibcm.MsgREQ)
	}
	if p.gsi && m.tw.inTimeWait(k) {
		m.mads.stale.Add(1)
		reject(cm.RejectStaleConn, "connection %#x of %s ended moments ago (TIMEWAIT)", r.LocalID, gidString(r.SrcGID))
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
	case m.tw.tooManyInProgress(p, r.SrcGID):
		reject(cm.RejectNoResources, "%s has %d requests being set up here, the most one address may", gidString(r.SrcGID), m.tw.maxInProgress)
		return
	case l.pending >= l.backlog:
		m.mads.backlogFull.Add(1)
		reject(cm.RejectNoResources, "the listener on port %d has %d requests waiting for an answer, its backlog: try again later", r.DstPort, l.pending)
		return
	case l.s.Lagging():
		m.adm.lagging.Add(1)
		reject(cm.RejectNoResources, "the listener on port %d is not reading its events (receiver not ready): try again later", r.DstPort)
		return
	}
	sp := m.ports.session(l.s)
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
		mtu: min(r.MTU, uint8(a.PortMTU())), remoteQPN: r.QPN}
	if v != nil {
		// The requester's transaction, and its timing: it answers a REP
		// within its local CM response timeout.
		c.tid, c.peerTimeout, c.maxRetries, c.packetLife = v.tid, v.localTimeout, v.maxRetries, m.packetLife
		if r.MTU > c.mtu {
			// A REP has no MTU: the requester's QP uses the REQ's, which
			// this port cannot carry (rxe refuses it too). The REJ's ARI
			// says what it can: a vrdma requester asks again with it.
			out := v.reply(a.GUID)
			out.ari = []byte{c.mtu}
			m.retr.send(p, out, &cm.REJ{RemoteID: r.LocalID, Reason: cm.RejectInvalidMTU})
			l.s.Uncharge(Connections)
			return
		}
	}
	c.sgidIndex, c.localGID = responderGID(a, r.DstGID, r.SrcGID)
	m.book.add(c, m.ports.requestID(sp))
	m.tw.beginInProgress(c)
	l.pending++
	m.book.arm(c, c.timeout)
	ev := c.event(proto.CMEventRequest)
	ev.Listener, ev.QPType, ev.GID, ev.QPN, ev.PSN = l.id, r.QPType, r.SrcGID[:], r.QPN, r.PSN
	ev.MTU, ev.RdAtomic, ev.SGIDIndex = c.mtu, min(r.ResponderResources, r.InitiatorDepth), c.sgidIndex
	if r.QPType == cm.QPTypeXRCSend {
		// An initiator serves nothing: its target serves as many READs and
		// atomics as it issues.
		ev.RdAtomic = r.InitiatorDepth
	}
	ev.LocalAddr, ev.LocalPort, ev.RemoteAddr, ev.RemotePort = r.DstGID[:], r.DstPort, r.SrcGID[:], r.SrcPort
	ev.PrivateData = r.PrivateData
	l.s.Emit(ev)
}

// requestID returns an unused id for a request handed to the session of
// sp: the daemon's ids, CMDaemonIDBase and up; m.mu is held.
func (m *ports) requestID(sp *sessionPart) uint32 {
	id := sp.nextID
	for sp.conns[id] != nil || id < proto.CMDaemonIDBase {
		id++
		if id < proto.CMDaemonIDBase {
			id = proto.CMDaemonIDBase
		}
	}
	sp.nextID = id + 1
	return id
}

func (m *peerMessages) onREP(p *peer, v *via, r *cm.REP) {
	c := m.book.connFor(p, v, r)
	if c == nil {
		if p.gsi && v != nil && m.tw.inTimeWait(remoteKey{p: p, gid: v.src, id: r.LocalID}) {
			return // a late copy of the reply of a connection that ended
		}
		m.msgs.answer(p, v, &cm.REJ{RemoteID: r.LocalID, Reason: cm.RejectInvalidCommID,
			Text: fmt.Sprintf("no request %#x waits for a reply here: it timed out or was cancelled", r.RemoteID)}, ibcm.MsgREP)
		return
	}
	if !c.active || c.state != reqSent {
		// A second reply: the first one counts. Over MADs it means the
		// RTU was lost: it goes again.
		if p.gsi && duplicateREP(c.active, c.state, c.remoteID == r.LocalID) == answerResend {
			m.retr.resend(c)
		}
		return
	}
	if r.MTU == 0 { // over MADs a REP has no MTU: the REQ's holds
		r.MTU = c.mtu
	}
	if r.MTU > c.mtu {
		rej := &cm.REJ{LocalID: c.id, RemoteID: r.LocalID, Reason: cm.RejectInvalidMTU,
			Text: fmt.Sprintf("path MTU %d is above the requester's %d", r.MTU, c.mtu)}
		m.book.setRemote(c, r.LocalID)
		m.book.to(c, repRcvd)
		m.retr.send(p, c.via(m.core), rej)
		m.book.remove(c)
		ev := c.event(proto.CMEventRejected)
		ev.Reason, ev.Text = uint16(cm.RejectInvalidMTU), fmt.Sprintf("the reply chose MTU %d, above this port's %d", r.MTU, c.mtu)
		c.tell(ev)
		return
	}
	m.book.setRemote(c, r.LocalID)
	xrc := c.qpType == cm.QPTypeXRCSend
	if v != nil {
		if xrc {
			// A REP from an XRC target carries its QPN as the Local EE
			// Context Number (IBTA A14; Linux's cm_rep_get_qpn).
			v.qpn = v.eecn
			r.QPN = v.eecn
		}
		c.remoteQPN = v.qpn
	}
	m.book.to(c, repRcvd)
	c.mtu = r.MTU
	m.book.arm(c, c.timeout)
	ev := c.event(proto.CMEventReply)
	ev.QPType, ev.GID, ev.QPN, ev.PSN, ev.MTU = c.qpType, r.GID[:], r.QPN, r.PSN, r.MTU
	ev.RdAtomic, ev.SGIDIndex = min(r.ResponderResources, r.InitiatorDepth), c.sgidIndex
	if xrc {
		ev.RdAtomic = r.ResponderResources // a target issues nothing: the initiator issues what it serves
	}
	ev.PrivateData = r.PrivateData
	c.tell(ev)
}

func (m *peerMessages) onRTU(p *peer, v *via, r *cm.RTU) {
	c := m.book.connFor(p, v, r)
	if c == nil {
		if p.gsi && v != nil && m.tw.inTimeWait(remoteKey{p: p, gid: v.src, id: r.LocalID}) {
			return
		}
		m.msgs.answer(p, v, &cm.REJ{RemoteID: r.LocalID, Reason: cm.RejectInvalidCommID,
			Text: fmt.Sprintf("connection %#x does not wait for a confirmation here: it timed out or was rejected", r.RemoteID)}, ibcm.MsgOther)
		return
	}
	if c.active || c.state != repSent {
		return
	}
	m.book.to(c, established)
	ev := c.event(proto.CMEventEstablished)
	ev.PrivateData = r.PrivateData
	c.tell(ev)
}

func (m *peerMessages) onREJ(p *peer, v *via, r *cm.REJ) []func() {
	c := m.book.connFor(p, v, r)
	if c == nil {
		return nil // never answer a REJ: two daemons would bounce them for ever
	}
	if req, ok := c.last.(*cm.REQ); ok && c.active && c.state == reqSent && r.Reason == cm.RejectInvalidMTU && v != nil {
		if mtu, ok := mtuRetry(v.ari, req.MTU); ok { // rules.go
			// The responder's port carries a smaller MTU, which its REJ
			// names: the same request again with it.
			again := *req
			again.MTU = mtu
			c.mtu = again.MTU
			m.mads.mtuRetries.Add(1)
			m.retr.sendConn(c, &again, true)
			return nil
		}
		if lateMTURejection(v.ari, req.MTU) { // rules.go
			m.mads.duplicates.Add(1)
			return nil
		}
	}
	st := c.state
	m.book.remove(c)
	ev := c.event(proto.CMEventRejected)
	ev.Reason, ev.Text, ev.PrivateData = uint16(r.Reason), r.Text, r.PrivateData
	if ev.Text == "" {
		ev.Text = rejectText(c, r.Reason)
	}
	switch st {
	case repSent:
		return []func(){func() { errQP(c); c.tell(ev) }}
	case established:
		ev.Type = proto.CMEventDisconnected
		return []func(){func() { errQP(c); c.tell(ev) }}
	case dreqSent:
		ev.Type = proto.CMEventDisconnectDone
	}
	c.tell(ev)
	return nil
}

// rejectText says for people why c was rejected, when the REJ said only
// its reason (a MAD has no text).
func rejectText(c *connection, reason cm.Reason) string {
	switch reason {
	case cm.RejectInvalidServiceID:
		if c.active {
			return fmt.Sprintf("no listener on port %d of %s", c.remotePort, gidString(c.remoteGID))
		}
	case cm.RejectInvalidGID:
		if c.active {
			return fmt.Sprintf("%s is not the address of an adapter of the host that answered", gidString(c.remoteGID))
		}
	case cm.RejectTimeout:
		if c.active {
			return "the listener gave up waiting for this side"
		}
		return "the requester gave up"
	case cm.RejectConsumer:
		return "rejected by the peer's application"
	}
	return fmt.Sprintf("rejected by the peer: %v", reason)
}

func (m *peerMessages) onDREQ(p *peer, v *via, r *cm.DREQ) []func() {
	c := m.book.connFor(p, v, r)
	// The answer goes even for a connection that is gone here: the DREP
	// of an earlier DREQ may have been lost.
	drep := &cm.DREP{LocalID: r.RemoteID, RemoteID: r.LocalID}
	if c != nil && p.gsi {
		m.retr.send(p, c.via(m.core), drep)
	} else {
		m.msgs.answer(p, v, drep, ibcm.MsgOther)
	}
	if c == nil {
		if p.gsi {
			m.mads.duplicates.Add(1)
		}
		return nil
	}
	switch c.state {
	case established, repSent:
		c.reached = true
		m.book.remove(c)
		ev := c.event(proto.CMEventDisconnected)
		ev.PrivateData = r.PrivateData
		if c.keepQP { // as rdma_cm: the QP goes to ERR when the application disconnects
			return []func(){func() { c.tell(ev) }}
		}
		return []func(){func() { errQP(c); c.tell(ev) }}
	case dreqSent: // both sides disconnect at once
		m.book.remove(c)
		c.tell(c.event(proto.CMEventDisconnectDone))
	}
	return nil
}

func (m *peerMessages) onDREP(p *peer, v *via, r *cm.DREP) {
	c := m.book.connFor(p, v, r)
	if c == nil || c.state != dreqSent {
		return
	}
	m.book.remove(c)
	ev := c.event(proto.CMEventDisconnectDone)
	ev.PrivateData = r.PrivateData
	c.tell(ev)
}

// expire runs when c's timer fires in the state it was armed in.
func (m *connBook) expire(c *connection, gen uint32) {
	m.mu.Lock()
	if m.closed || m.conns[c.id] != c || c.gen != gen {
		m.mu.Unlock()
		return
	}
	after := m.book.expireLocked(c)
	m.mu.Unlock()
	after()
}

// expireLocked ends c, which waited too long (its timer, or its last
// retransmission), and returns what to run once m.mu is released.
func (m *connBook) expireLocked(c *connection) func() {
	ev := c.event(proto.CMEventTimeout)
	ev.Reason = uint16(cm.RejectTimeout)
	rej := &cm.REJ{LocalID: c.id, RemoteID: c.remoteID, Reason: cm.RejectTimeout}
	wait := c.timeout
	if c.last != nil && c.retries >= c.maxRetries && c.peer != nil && c.peer.gsi {
		wait = time.Duration(c.retries+1) * c.retryInterval()
	}
	var errq bool
	switch c.state {
	case reqSent:
		rej.Text = fmt.Sprintf("the requester got no reply within %v and gave up", wait)
		ev.Text = fmt.Sprintf("no reply within %v", wait)
	case repRcvd:
		rej.Text = fmt.Sprintf("the requester did not connect its QP within %v", wait)
		ev.Text = fmt.Sprintf("the QP was not connected and confirmed within %v of the reply", wait)
	case reqRcvd:
		rej.Text = fmt.Sprintf("the listener on port %d did not answer within %v", c.localPort, wait)
		ev.Text = fmt.Sprintf("the request was not answered within %v: the requester gave up", wait)
	case repSent:
		rej.Text = fmt.Sprintf("no confirmation (RTU) of the reply within %v", wait)
		ev.Text = rej.Text
		errq = true
	case dreqSent:
		rej = nil
		ev = c.event(proto.CMEventDisconnectDone)
		ev.Text = fmt.Sprintf("the peer did not answer the disconnection within %v", wait)
	}
	if rej != nil && c.qpType != uint8(abi.QPTypeUD) { // SIDR: the requester times out on its own
		m.retr.send(c.peer, c.via(m.core), rej)
	}
	m.book.remove(c)
	if !errq {
		c.tell(ev)
		return func() {}
	}
	return func() {
		errQP(c)
		c.tell(ev)
	}
}
