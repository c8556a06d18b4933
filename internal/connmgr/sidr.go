package connmgr

// SIDR, service ID resolution for UD (rdma_cm's UDP port space, which
// udaddy uses): a session's dial on a UD QP sends a SIDR_REQ for the port;
// the listener's session gets a request event (QPType UD) and answers, by
// accept on its UD QP, a SIDR_REP with that QP's number and Q_Key — or by
// reject, a SIDR_REP with a status; the requester gets an established event
// carrying the QPN, GID and Q_Key (or a rejection). No connection stays:
// the listener keeps its answer through TIMEWAIT to send it again to a
// repeated SIDR_REQ.

import (
	"fmt"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

// connectUD is Connect for a UD QP q: a SIDR_REQ. The session's lock is
// held.
func (m *commands) connectUD(s Session, req proto.CMConnectReq, q *engine.QP) (proto.CMConnectResp, error) {
	var none proto.CMConnectResp
	if err := checkClientID(req.ID, false); err != nil {
		return none, err
	}
	if len(req.PrivateData) > sidrReqPrivate {
		return none, proto.Errorf(proto.CodeInvalid, "private data of %d bytes: a SIDR_REQ carries at most %d", len(req.PrivateData), sidrReqPrivate)
	}
	if len(req.Addr) != 16 {
		return none, proto.Errorf(proto.CodeInvalid, "address of %d bytes: a GID has 16 (IPv4 as ::ffff:a.b.c.d)", len(req.Addr))
	}
	if req.Port == 0 {
		return none, proto.Errorf(proto.CodeInvalid, "port 0: name the port the peer listens on")
	}
	dst := [16]byte(req.Addr)
	if dst == ([16]byte{}) {
		return none, proto.Errorf(proto.CodeInvalid, "address :: : name an address of the peer's adapter")
	}
	local := m.host.IsLocalGID(dst)
	if !local && m.mad.gsiPeer == nil {
		return none, proto.Errorf(proto.CodeInvalid, "a UD QP's dial to another host is a SIDR_REQ, a CM MAD: this connection manager has no QP1 (Config.GSI) to send it on")
	}
	a := s.Adapter()
	_, src := sourceGID(a, dst)
	if !local {
		if err := m.mad.madRoute(src, dst); err != nil {
			return none, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.cmds.chargeDial(s, req.ID); err != nil {
		return none, err
	}
	p := m.local
	if !local {
		p = m.mad.gsiPeer
	}
	c := &connection{s: s, active: true, state: reqSent, peer: p, timeout: timeoutOf(req.TimeoutMs), qpType: uint8(abi.QPTypeUD),
		qpHandle: req.QP, qp: q, remoteGID: dst, remotePort: req.Port}
	m.cmds.startDial(c, a, req.ID)
	m.retr.sendConn(c, &sidrReq{RequestID: c.id, SrcPort: c.localPort, DstPort: req.Port, SrcGID: c.localGID, DstGID: dst,
		PrivateData: req.PrivateData}, true)
	return proto.CMConnectResp{LocalAddr: c.localGID[:], LocalPort: c.localPort, SGIDIndex: c.sgidIndex}, nil
}

// onSIDRReq hands a SIDR_REQ to the listener on its port; m.mu is held.
func (m *peerMessages) onSIDRReq(p *peer, v *via, r *sidrReq) {
	k := remoteKey{p: p, id: r.RequestID}
	if p.gsi && v != nil {
		k.gid = v.src
	}
	if m.remote[k] != nil { // asked again while the listener has not answered
		m.mads.duplicates.Add(1)
		return
	}
	if rep, ok := m.tw.timeWaitReply(k); ok && rep != nil { // answered moments ago: the answer was lost
		m.mads.duplicates.Add(1)
		m.msgs.answer(p, v, rep, 0)
		return
	}
	reply := func(status uint8) {
		m.msgs.answer(p, v, &sidrRep{RequestID: r.RequestID, Port: r.DstPort, Status: status}, 0)
	}
	l := m.listeners[r.DstPort]
	switch {
	case l == nil || !m.host.IsLocalGID(r.DstGID):
		reply(ibcm.SIDRNoService)
		return
	case m.tw.tooManyInProgress(p, r.SrcGID):
		reply(ibcm.SIDRNoResources)
		return
	case l.pending >= l.backlog:
		m.mads.backlogFull.Add(1)
		reply(ibcm.SIDRNoResources)
		return
	case l.s.Lagging():
		m.adm.lagging.Add(1)
		reply(ibcm.SIDRNoResources)
		return
	}
	sp := m.ports.session(l.s)
	if len(sp.conns) >= maxConns {
		reply(ibcm.SIDRNoResources)
		return
	}
	if err := l.s.Charge(Connections); err != nil {
		m.adm.overLimit.Add(1)
		reply(ibcm.SIDRNoResources)
		return
	}
	a := l.s.Adapter()
	c := &connection{s: l.s, state: reqRcvd, peer: p, remoteID: r.RequestID, listener: l, timeout: defaultTimeout,
		qpType: uint8(abi.QPTypeUD), localPort: r.DstPort, remoteGID: r.SrcGID, remotePort: r.SrcPort}
	if v != nil {
		c.tid = v.tid
	}
	c.sgidIndex, c.localGID = responderGID(a, r.DstGID, r.SrcGID)
	m.book.add(c, m.ports.requestID(sp))
	m.tw.beginInProgress(c)
	l.pending++
	m.book.arm(c, c.timeout)
	ev := c.event(proto.CMEventRequest)
	ev.Listener, ev.QPType, ev.GID, ev.SGIDIndex = l.id, c.qpType, r.SrcGID[:], c.sgidIndex
	ev.LocalAddr, ev.LocalPort, ev.RemoteAddr, ev.RemotePort = r.DstGID[:], r.DstPort, r.SrcGID[:], r.SrcPort
	ev.PrivateData = r.PrivateData
	l.s.Emit(ev)
}

// acceptUD answers the SIDR_REQ of c with s's UD QP h; m.mu and the
// session's lock are held.
func (m *commands) acceptUD(s Session, c *connection, req proto.CMAcceptReq) error {
	if len(req.PrivateData) > sidrRepPrivate {
		return proto.Errorf(proto.CodeInvalid, "private data of %d bytes: a SIDR_REP carries at most %d", len(req.PrivateData), sidrRepPrivate)
	}
	q, err := s.QP(req.QP)
	if err != nil {
		return err
	}
	if q.Type() != abi.QPTypeUD {
		return proto.Errorf(proto.CodeInvalid, "the request is for a UD QP and QP %d is %v", req.QP, q.Type())
	}
	switch q.State() {
	case abi.QPStateInit, abi.QPStateRTR, abi.QPStateRTS:
	default:
		return proto.Errorf(proto.CodeState, "QP %d is in %v: its Q_Key is set from INIT on; move it to INIT (or RTS) before accepting", req.QP, q.State())
	}
	rep := &sidrRep{RequestID: c.remoteID, Port: c.localPort, QPN: q.QPN(), QKey: q.Attr().QKey, PrivateData: req.PrivateData}
	m.retr.send(c.peer, c.via(m.core), rep)
	if c.peer != nil && c.peer.gsi {
		m.tw.enterTimeWait(c, rep)
	}
	m.book.remove(c)
	return nil
}

// rejectUD answers the SIDR_REQ of c with status, or, on the requester's
// side, drops c; m.mu is held.
func (m *commands) rejectUD(c *connection, status uint8, data []byte) {
	if !c.active && c.state == reqRcvd {
		m.retr.send(c.peer, c.via(m.core), &sidrRep{RequestID: c.remoteID, Port: c.localPort, Status: status, PrivateData: data})
	}
	m.book.remove(c)
}

// onSIDRRep ends the requester's side of a SIDR exchange; m.mu is held.
func (m *peerMessages) onSIDRRep(p *peer, v *via, r *sidrRep) {
	c := m.conns[r.RequestID]
	if c == nil || c.peer != p || (p.gsi && v != nil && v.src != c.remoteGID) || !c.active || c.qpType != uint8(abi.QPTypeUD) || c.state != reqSent {
		return // a late copy, or not ours: SIDR answers nothing
	}
	m.book.remove(c)
	if r.Status != ibcm.SIDRValid {
		ev := c.event(proto.CMEventRejected)
		ev.PrivateData = r.PrivateData
		switch r.Status {
		case ibcm.SIDRNoService:
			ev.Reason, ev.Text = uint16(cm.RejectInvalidServiceID), fmt.Sprintf("no listener on port %d of %s", c.remotePort, gidString(c.remoteGID))
		case ibcm.SIDRRejected:
			ev.Reason, ev.Text = uint16(cm.RejectConsumer), "rejected by the peer's application"
		case ibcm.SIDRNoResources:
			ev.Reason, ev.Text = uint16(cm.RejectNoResources), fmt.Sprintf("the listener on port %d cannot take more requests now", c.remotePort)
		default:
			ev.Reason, ev.Text = uint16(cm.RejectUnsupported), fmt.Sprintf("SIDR_REP status %d", r.Status)
		}
		c.tell(ev)
		return
	}
	ev := c.event(proto.CMEventEstablished)
	ev.QPType, ev.GID, ev.QPN, ev.QKey, ev.SGIDIndex = c.qpType, c.remoteGID[:], r.QPN, r.QKey, c.sgidIndex
	ev.LocalAddr, ev.LocalPort, ev.RemoteAddr, ev.RemotePort = c.localGID[:], c.localPort, c.remoteGID[:], c.remotePort
	ev.PrivateData = r.PrivateData
	c.tell(ev)
}
