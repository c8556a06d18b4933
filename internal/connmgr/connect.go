package connmgr

import (
	"unicode/utf8"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

// commands runs what a session asks of the connection manager for a
// connection: dial (REQ), answer a request (REP) or a reply (RTU), refuse
// (REJ), end (DREQ); and resolve an address (resolve_addr.go). SIDR's
// halves are in sidr.go.
type commands struct{ *core }

// A session's side of a connection: dial (REQ), answer a request (REP) or
// a reply (RTU), refuse (REJ), end (DREQ).

// Connect sends a request (REQ) from s's QP req.QP, in RESET, to the
// listener on req.Port of the adapter whose GID is req.Addr, under the
// library's id req.ID. It returns at once: the reply, a rejection or a
// timeout reaches s as an event. The session's lock is held.
func (m *commands) Connect(s Session, req proto.CMConnectReq) (proto.CMConnectResp, error) {
	var none proto.CMConnectResp
	if q, err := s.QP(req.QP); err == nil && q.Type() == abi.QPTypeUD {
		return m.cmds.connectUD(s, req, q) // sidr.go
	}
	if err := checkClientID(req.ID, false); err != nil {
		return none, err
	}
	if err := checkPrivateData(cm.TypeREQ, req.PrivateData); err != nil {
		return none, err
	}
	if err := checkPSN(req.PSN); err != nil {
		return none, err
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
	q, err := qpOf(s, req.QP, true)
	if err != nil {
		return none, err
	}
	// RESET (the library's own QPs) or INIT (rdma-core leaves a QP there
	// after rdma_create_qp, and an application's own QP, connected with
	// rdma_init_qp_attr, may be there): the library moves it on.
	if st := q.State(); st != abi.QPStateReset && st != abi.QPStateInit {
		return none, proto.Errorf(proto.CodeState, "QP %d is in %v: the connection manager connects a QP in RESET or INIT; modify it to RESET first, or create a new one", req.QP, st)
	}
	p := m.local
	if !m.host.IsLocalGID(dst) {
		_, src := sourceGID(s.Adapter(), dst)
		if err := m.mad.madRoute(src, dst); err != nil {
			return none, err
		}
		p = m.mad.gsiPeer
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.cmds.chargeDial(s, req.ID); err != nil {
		return none, err
	}
	a := s.Adapter()
	c := &connection{s: s, active: true, state: reqSent, peer: p, timeout: timeoutOf(req.TimeoutMs), qpType: uint8(q.Type()),
		qpHandle: req.QP, qp: q, keepQP: req.KeepQP, remoteGID: dst, remotePort: req.Port, mtu: uint8(a.PortMTU())}
	m.cmds.startDial(c, a, req.ID)
	rd := min(req.RdAtomic, engine.MaxRdAtomic)
	serve := rd
	if c.qpType == cm.QPTypeXRCSend {
		serve = 0 // an initiator serves no READs or atomics (IBTA; the kernel's CM leaves the field 0)
	}
	m.retr.sendConn(c, &cm.REQ{LocalID: c.id, SrcPort: c.localPort, DstPort: req.Port, QPType: c.qpType, MTU: c.mtu,
		ResponderResources: serve, InitiatorDepth: rd, QPN: q.QPN(), PSN: req.PSN,
		TimeoutMillis: req.TimeoutMs, SrcGID: c.localGID, DstGID: dst, PrivateData: req.PrivateData}, true)
	return proto.CMConnectResp{LocalAddr: c.localGID[:], LocalPort: c.localPort, SGIDIndex: c.sgidIndex}, nil
}

// chargeDial admits a dial of s under the library's id: a new id, within
// the connections a session may have, charged to its quota; m.mu is held.
func (m *commands) chargeDial(s Session, id uint32) error {
	sp := m.ports.session(s)
	if err := checkClientID(id, sp.conns[id] != nil); err != nil {
		return err
	}
	if len(sp.conns) >= maxConns {
		return proto.Errorf(proto.CodeLimit, "this process has %d connections, the most it may: disconnect some first", len(sp.conns))
	}
	return s.Charge(Connections)
}

// startDial gives the requester's connection c (to c.remoteGID, from
// adapter a) its source GID, port, transaction ID and CM timeouts, and
// registers it under the library's id, its timer armed; m.mu is held.
func (m *commands) startDial(c *connection, a *engine.Adapter, id uint32) {
	c.sgidIndex, c.localGID = sourceGID(a, c.remoteGID)
	c.localPort, _ = m.ports.nextEphemeral()
	c.tid = m.rng.Uint64()
	c.peerTimeout, c.packetLife, c.maxRetries = m.respTimeout, m.packetLife, m.maxRetry
	m.book.add(c, id)
	m.book.arm(c, c.timeout)
}

// connOf finds the connection a command names; m.mu is held.
func (m *commands) connOf(s Session, id uint32) (*connection, error) {
	if sp := m.sessions[s]; sp != nil {
		if c := sp.conns[id]; c != nil {
			return c, nil
		}
	}
	return nil, proto.Errorf(proto.CodeNotFound, "no connection %d: it was rejected, timed out or ended (its event says which)", id)
}

// Accept answers, for s, the request req.ID with a reply (REP) from QP
// req.QP, connected to the requester's (RTR or RTS) — the listener's side;
// or confirms the reply to s's request with an RTU once its QP is in RTS —
// the dialling side. The session's lock is held.
func (m *commands) Accept(s Session, req proto.CMAcceptReq) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.cmds.connOf(s, req.ID)
	if err != nil {
		return err
	}
	switch {
	case !c.active && c.state == reqRcvd && c.qpType == uint8(abi.QPTypeUD):
		return m.cmds.acceptUD(s, c, req) // sidr.go
	case !c.active && c.state == reqRcvd:
		if err := checkPrivateData(cm.TypeREP, req.PrivateData); err != nil {
			return err
		}
		if err := checkPSN(req.PSN); err != nil {
			return err
		}
		q, err := qpOf(s, req.QP, false)
		if err != nil {
			return err
		}
		if want := cm.ResponderQPType(c.qpType); uint8(q.Type()) != want {
			return proto.Errorf(proto.CodeInvalid, "the request is from a %v QP, answered by a %v QP, and QP %d is %v", abi.QPType(c.qpType), abi.QPType(want), req.QP, q.Type())
		}
		if st := q.State(); st != abi.QPStateRTR && st != abi.QPStateRTS {
			return proto.Errorf(proto.CodeState, "QP %d is in %v: connect it to the requester's QP (RTR or RTS) before accepting", req.QP, st)
		}
		c.listener.pending--
		c.listener = nil
		c.qpHandle, c.qp, c.keepQP = req.QP, q, req.KeepQP
		m.book.to(c, repSent)
		m.book.arm(c, c.timeout)
		rd := min(req.RdAtomic, engine.MaxRdAtomic)
		issue := rd
		if c.qpType == cm.QPTypeXRCSend {
			issue = 0 // a target issues no READs or atomics
		}
		m.retr.sendConn(c, &cm.REP{LocalID: c.id, RemoteID: c.remoteID, MTU: c.mtu, ResponderResources: rd, InitiatorDepth: issue,
			QPN: q.QPN(), PSN: req.PSN, GID: c.localGID, PrivateData: req.PrivateData}, true)
	case c.active && c.state == repRcvd:
		if err := checkPrivateData(cm.TypeRTU, req.PrivateData); err != nil {
			return err
		}
		if st := c.qp.State(); !c.hasQP() || st != abi.QPStateRTS {
			return proto.Errorf(proto.CodeState, "QP %d is in %v: connect it to the responder's QP (RTS) before confirming", c.qpHandle, st)
		}
		m.book.to(c, established)
		m.retr.sendConn(c, &cm.RTU{LocalID: c.id, RemoteID: c.remoteID, PrivateData: req.PrivateData}, false)
	default:
		return proto.Errorf(proto.CodeState, "connection %d is %v: accept answers a request (listener side) or a reply (dialling side)", req.ID, c.state)
	}
	return nil
}

// Reject refuses, for s, the request or reply req.ID with a REJ, the
// reason req.Reason (0: the application's) and req.Text. The session's
// lock is held.
func (m *commands) Reject(s Session, req proto.CMRejectReq) error {
	if err := checkPrivateData(cm.TypeREJ, req.PrivateData); err != nil {
		return err
	}
	if len(req.Text) > cm.MaxRejectText || !utf8.ValidString(req.Text) {
		return proto.Errorf(proto.CodeInvalid, "reason text of %d bytes: at most %d bytes of UTF-8", len(req.Text), cm.MaxRejectText)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.cmds.connOf(s, req.ID)
	if err != nil {
		return err
	}
	switch c.state {
	case established, dreqSent:
		return proto.Errorf(proto.CodeState, "connection %d is %v: end it with disconnect", req.ID, c.state)
	case repSent:
		errQPLocked(c)
	}
	if c.qpType == uint8(abi.QPTypeUD) {
		status := uint8(ibcm.SIDRRejected)
		if len(req.PrivateData) > sidrRepPrivate {
			return proto.Errorf(proto.CodeInvalid, "private data of %d bytes: a SIDR_REP carries at most %d", len(req.PrivateData), sidrRepPrivate)
		}
		m.cmds.rejectUD(c, status, req.PrivateData)
		return nil
	}
	reason := cm.Reason(req.Reason)
	if reason == 0 {
		reason = cm.RejectConsumer
	}
	m.retr.send(c.peer, c.via(m.core), &cm.REJ{LocalID: c.id, RemoteID: c.remoteID, Reason: reason, Text: req.Text, PrivateData: req.PrivateData})
	m.book.remove(c)
	return nil
}

// Disconnect ends s's established connection req.ID: its QP goes to the
// error state and a DREQ to the peer; the peer's answer reaches s as an
// event. The session's lock is held.
func (m *commands) Disconnect(s Session, req proto.CMDisconnectReq) error {
	if err := checkPrivateData(cm.TypeDREQ, req.PrivateData); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.cmds.connOf(s, req.ID)
	if err != nil {
		return err
	}
	if c.state != established {
		return proto.Errorf(proto.CodeState, "connection %d is %v, not established: reject it instead", req.ID, c.state)
	}
	errQPLocked(c)
	if c.peer == nil {
		m.book.remove(c)
		ev := c.event(proto.CMEventDisconnectDone)
		ev.Text = "the connection to the peer's connection manager was lost: the peer was not told"
		s.Emit(ev)
		return nil
	}
	m.book.to(c, dreqSent)
	m.book.arm(c, c.timeout)
	m.retr.sendConn(c, &cm.DREQ{LocalID: c.id, RemoteID: c.remoteID, PrivateData: req.PrivateData}, true)
	return nil
}
