package daemon

import (
	"net/netip"
	"unicode/utf8"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// A session's side of a connection: dial (REQ), answer a request (REP) or
// a reply (RTU), refuse (REJ), end (DREQ).

func (m *cmManager) connect(s *session, req proto.CMConnectReq) (proto.CMConnectResp, error) {
	var none proto.CMConnectResp
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
	q, err := cmQP(s, req.QP)
	if err != nil {
		return none, err
	}
	if st := q.State(); st != abi.QPStateReset {
		return none, proto.Errorf(proto.CodeState, "QP %d is in %v: the connection manager takes a QP from RESET to RTS; modify it to RESET first, or create a new one", req.QP, st)
	}
	var peer *cmPeer
	var endpoint admit.Endpoint
	if !m.d.host.IsLocalGID(dst) {
		if endpoint, err = m.resolve(netip.AddrFrom16(dst).Unmap()); err != nil {
			return none, proto.Errorf(proto.CodeNotFound, "cannot find the connection manager of %s: %v", gidString(dst), err)
		}
		if endpoint.Addr == "" {
			return none, proto.Errorf(proto.CodeNotFound, "cannot find the connection manager of %s: the resolver gave no endpoint", gidString(dst))
		}
		if endpoint.Identity == "" && m.adm.authorize != nil {
			return none, proto.Errorf(proto.CodeNotFound, "cannot tell whose connection manager %s is: the daemon's CMResolvePeer named no identity there, which CMAuthorize needs", endpoint.Addr)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.session(s)
	if err := checkClientID(req.ID, cs.conns[req.ID] != nil); err != nil {
		return none, err
	}
	if len(cs.conns) >= cmMaxConns {
		return none, proto.Errorf(proto.CodeLimit, "this process has %d connections, the most it may: disconnect some first", len(cs.conns))
	}
	if endpoint.Addr == "" {
		peer = m.local
	} else if peer, err = m.peerFor(endpoint.Addr, endpoint.Identity); err != nil {
		return none, proto.Errorf(proto.CodeLimit, "%v", err)
	}
	c := &cmConn{s: s, active: true, state: cmReqSent, peer: peer, timeout: timeoutOf(req.TimeoutMs), qpType: uint8(q.Type()),
		qpHandle: req.QP, qp: q, remoteGID: dst, remotePort: req.Port, mtu: uint8(s.adapter.PortMTU())}
	c.sgidIndex, c.localGID = sourceGID(s.adapter, dst)
	c.localPort, _ = m.nextEphemeral()
	m.add(c, req.ID)
	m.arm(c, c.timeout)
	rd := min(req.RdAtomic, engine.MaxRdAtomic)
	m.send(peer, &cm.REQ{LocalID: c.id, SrcPort: c.localPort, DstPort: req.Port, QPType: c.qpType, MTU: c.mtu,
		ResponderResources: rd, InitiatorDepth: rd, QPN: q.QPN(), PSN: req.PSN,
		TimeoutMillis: req.TimeoutMs, SrcGID: c.localGID, DstGID: dst, PrivateData: req.PrivateData})
	return proto.CMConnectResp{LocalAddr: c.localGID[:], LocalPort: c.localPort, SGIDIndex: c.sgidIndex}, nil
}

// conn finds the connection a command names; m.mu is held.
func (m *cmManager) conn(s *session, id uint32) (*cmConn, error) {
	if cs := m.sessions[s]; cs != nil {
		if c := cs.conns[id]; c != nil {
			return c, nil
		}
	}
	return nil, proto.Errorf(proto.CodeNotFound, "no connection %d: it was rejected, timed out or ended (its event says which)", id)
}

func (m *cmManager) accept(s *session, req proto.CMAcceptReq) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.conn(s, req.ID)
	if err != nil {
		return err
	}
	switch {
	case !c.active && c.state == cmReqRcvd:
		if err := checkPrivateData(cm.TypeREP, req.PrivateData); err != nil {
			return err
		}
		if err := checkPSN(req.PSN); err != nil {
			return err
		}
		q, err := cmQP(s, req.QP)
		if err != nil {
			return err
		}
		if uint8(q.Type()) != c.qpType {
			return proto.Errorf(proto.CodeInvalid, "the request is for a %v QP and QP %d is %v", abi.QPType(c.qpType), req.QP, q.Type())
		}
		if st := q.State(); st != abi.QPStateRTR && st != abi.QPStateRTS {
			return proto.Errorf(proto.CodeState, "QP %d is in %v: connect it to the requester's QP (RTR or RTS) before accepting", req.QP, st)
		}
		c.listener.pending--
		c.listener = nil
		c.qpHandle, c.qp = req.QP, q
		m.to(c, cmRepSent)
		m.arm(c, c.timeout)
		rd := min(req.RdAtomic, engine.MaxRdAtomic)
		m.send(c.peer, &cm.REP{LocalID: c.id, RemoteID: c.remoteID, MTU: c.mtu, ResponderResources: rd, InitiatorDepth: rd,
			QPN: q.QPN(), PSN: req.PSN, GID: c.localGID, PrivateData: req.PrivateData})
	case c.active && c.state == cmRepRcvd:
		if err := checkPrivateData(cm.TypeRTU, req.PrivateData); err != nil {
			return err
		}
		if st := c.qp.State(); s.qps[c.qpHandle] != c.qp || st != abi.QPStateRTS {
			return proto.Errorf(proto.CodeState, "QP %d is in %v: connect it to the responder's QP (RTS) before confirming", c.qpHandle, st)
		}
		m.to(c, cmEstablished)
		m.send(c.peer, &cm.RTU{LocalID: c.id, RemoteID: c.remoteID, PrivateData: req.PrivateData})
	default:
		return proto.Errorf(proto.CodeState, "connection %d is %v: accept answers a request (listener side) or a reply (dialling side)", req.ID, c.state)
	}
	return nil
}

func (m *cmManager) reject(s *session, req proto.CMRejectReq) error {
	if err := checkPrivateData(cm.TypeREJ, req.PrivateData); err != nil {
		return err
	}
	if len(req.Text) > cm.MaxRejectText || !utf8.ValidString(req.Text) {
		return proto.Errorf(proto.CodeInvalid, "reason text of %d bytes: at most %d bytes of UTF-8", len(req.Text), cm.MaxRejectText)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.conn(s, req.ID)
	if err != nil {
		return err
	}
	switch c.state {
	case cmEstablished, cmDreqSent:
		return proto.Errorf(proto.CodeState, "connection %d is %v: end it with disconnect", req.ID, c.state)
	case cmRepSent:
		errQPLocked(c)
	}
	reason := cm.Reason(req.Reason)
	if reason == 0 {
		reason = cm.RejectConsumer
	}
	m.send(c.peer, &cm.REJ{LocalID: c.id, RemoteID: c.remoteID, Reason: reason, Text: req.Text, PrivateData: req.PrivateData})
	m.remove(c)
	return nil
}

func (m *cmManager) disconnect(s *session, req proto.CMDisconnectReq) error {
	if err := checkPrivateData(cm.TypeDREQ, req.PrivateData); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.conn(s, req.ID)
	if err != nil {
		return err
	}
	if c.state != cmEstablished {
		return proto.Errorf(proto.CodeState, "connection %d is %v, not established: reject it instead", req.ID, c.state)
	}
	errQPLocked(c)
	if c.peer == nil {
		m.remove(c)
		ev := c.event(proto.CMEventDisconnectDone)
		ev.Text = "the connection to the peer's connection manager was lost: the peer was not told"
		m.emit(s, ev)
		return nil
	}
	m.to(c, cmDreqSent)
	m.arm(c, c.timeout)
	m.send(c.peer, &cm.DREQ{LocalID: c.id, RemoteID: c.remoteID, PrivateData: req.PrivateData})
	return nil
}
