package daemon

// rdma_cm for the UD QPs of instances bound to a verbs uplink: SIDR through
// the device's own CM (docs/design/verbs-uplink-cm.md). A UD listener is an
// id of the kernel's UDP port space (the library says which port space a
// listener is: proto.CMListenReq.UD); a UD QP's dial is a SIDR_REQ; the
// listener's accept is the SIDR_REP naming its device UD QP, its reject a
// SIDR_REP with status "rejected". The events reach the session as the
// software CM's SIDR events do (internal/connmgr sidr.go): the request
// (QPType UD) with the peer's address as its GID, and on the dialling side
// Established with the peer's QPN and Q_Key, the GID and the GID index the
// kernel's address handle names, so the library's ah_attr makes an AH of
// the device's. No connection stays: both ids are destroyed once answered.

import (
	"fmt"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/verbs"
)

// cmUDDevice is what the device CM asks of a device for UD ids.
type cmUDDevice interface {
	CMUDListen(a verbs.CMAddr, backlog uint32) (uint32, uint16, error)
	CMUDConnect(verbs.CMConnectParam) (uint32, error)
	CMUDAccept(id, qpn uint32, pdata []byte) error
}

// What SIDR's messages carry of private data after rdma_cm's header.
const (
	sidrReqPrivate = 180
	sidrRepPrivate = 136
)

// ConnectUD sends a SIDR_REQ to req.Addr:req.Port through the device's CM
// for c's UD QP (its number qpn, which the SIDR_REQ does not carry).
func (m *deviceCM) ConnectUD(c cmClient, req proto.CMConnectReq, qpn uint32) (proto.CMConnectResp, error) {
	if len(req.PrivateData) > sidrReqPrivate {
		return proto.CMConnectResp{}, proto.Errorf(proto.CodeInvalid, "private data of %d bytes: a SIDR_REQ carries at most %d", len(req.PrivateData), sidrReqPrivate)
	}
	return m.connect(c, req, qpn, true)
}

// acceptUD answers dc's SIDR_REQ with the SIDR_REP naming c's device UD
// QP; m.mu is held.
func (m *deviceCM) acceptUD(dc *devConn, req proto.CMAcceptReq, qpn func(want abi.QPType) (uint32, error)) error {
	if dc.kind != devRequested {
		return proto.Errorf(proto.CodeState, "connection %d is a UD QP's dial: it ends with its SIDR reply; accept answers a request", req.ID)
	}
	if len(req.PrivateData) > sidrRepPrivate {
		return proto.Errorf(proto.CodeInvalid, "private data of %d bytes: a SIDR_REP carries at most %d", len(req.PrivateData), sidrRepPrivate)
	}
	n, err := qpn(abi.QPTypeUD)
	if err != nil {
		return err
	}
	if err := m.dev.CMUDAccept(dc.hid, n, req.PrivateData); err != nil {
		return m.fail(err, "answering the SIDR request")
	}
	m.drop(dc)
	return nil
}

// onUDRequest hands a SIDR_REQ to its UD listener's session; m.mu is
// held.
func (m *deviceCM) onUDRequest(e verbs.CMEvent) {
	l := m.byHID[e.Listener]
	refuse := func() {
		m.dev.CMReject(e.ID, nil)
		m.dev.CMDestroy(e.ID)
	}
	if l == nil || l.kind != devListener || !l.ud {
		refuse()
		return
	}
	if err := l.c.Charge(connmgr.Connections); err != nil {
		m.log.Info("a SIDR request on a verbs uplink refused", "link", m.link, "reason", err)
		refuse()
		return
	}
	idx, _, _ := m.source(e.Local.Addr)
	m.nextID++
	id := proto.CMDaemonIDBase + m.nextID%(1<<31-1)
	m.add(&devConn{c: l.c, id: id, hid: e.ID, kind: devRequested, listener: l.id, ud: true})
	l.c.Emit(proto.CMEvent{Type: proto.CMEventRequest, ID: id, Listener: l.id, QPType: uint8(abi.QPTypeUD),
		GID: append([]byte(nil), e.Peer.Addr[:]...), SGIDIndex: idx,
		LocalAddr: append([]byte(nil), e.Local.Addr[:]...), LocalPort: e.Local.Port,
		RemoteAddr: append([]byte(nil), e.Peer.Addr[:]...), RemotePort: e.Peer.Port, PrivateData: e.PrivateData})
}

// onUDEvent turns a UD id's event into the session's, reporting whether it
// did; m.mu is held.
func (m *deviceCM) onUDEvent(dc *devConn, e verbs.CMEvent) bool {
	switch {
	case e.Event == verbs.CMEstablished && dc.kind == devDialled && e.UD != nil:
		u := e.UD
		dc.c.Emit(proto.CMEvent{Type: proto.CMEventEstablished, ID: dc.id, QPType: uint8(abi.QPTypeUD),
			GID: append([]byte(nil), u.AH.DGID[:]...), QPN: u.QPN, QKey: u.QKey, SGIDIndex: u.AH.SGIDIndex,
			LocalAddr: append([]byte(nil), e.Local.Addr[:]...), LocalPort: e.Local.Port,
			RemoteAddr: append([]byte(nil), e.Peer.Addr[:]...), RemotePort: e.Peer.Port, PrivateData: e.PrivateData})
	case e.Event == verbs.CMUnreachable && e.Status > 0:
		// A SIDR_REP with a status: rejected, as the software CM says it.
		reason := cm.RejectUnsupported
		switch e.Status {
		case 1:
			reason = cm.RejectInvalidServiceID
		case 2:
			reason = cm.RejectConsumer
		case 3:
			reason = cm.RejectNoResources
		}
		dc.c.Emit(proto.CMEvent{Type: proto.CMEventRejected, ID: dc.id, Reason: uint16(reason),
			Text: fmt.Sprintf("%s, on verbs link %s", verbs.SIDRStatus(e.Status), m.link), PrivateData: e.PrivateData})
	case e.Event == verbs.CMUnreachable && e.Status == -110: // ETIMEDOUT
		dc.c.Emit(proto.CMEvent{Type: proto.CMEventTimeout, ID: dc.id, Text: fmt.Sprintf("no SIDR reply on verbs link %s", m.link)})
	default:
		return false
	}
	m.drop(dc)
	return true
}

// qpUD reports whether s's QP h is a UD QP (its dial is SIDR); s.mu is
// held.
func (s *session) qpUD(h uint32) bool {
	q, err := lookup(s.qps, h, "queue pair")
	return err == nil && q.Type() == abi.QPTypeUD
}

// boundMcastRefused refuses multicast on an instance bound to a verbs
// uplink: its UD QPs are the device's, and attaching them to a group
// (ibv_attach_mcast, which rdma_join_multicast does) on the device and
// joining through the device's CM is not built; the daemon's own groups
// would never see the device's traffic. nil for an instance not bound.
func boundMcastRefused(s *session) error {
	if s.adapter == nil || s.adapter.Uplink() == nil {
		return nil
	}
	name := s.adapter.Uplink().Name
	return proto.Errorf(proto.CodeState, "multicast is not supported on verbs link %s yet: this instance's UD QPs are device %s's, and attaching them to a group through the device (ibv_attach_mcast, rdma_join_multicast) is not built; use an instance without --uplink for multicast", name, name)
}
