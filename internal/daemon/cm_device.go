package daemon

// rdma_cm for instances bound to a verbs uplink (docs/design/verbs-uplink-cm.md): the host kernel owns the device's QP1 and, for
// rxe, UDP 4791 on its netdev, so the daemon's own CM cannot carry their
// REQ, REP and RTU. Their commands go to the device's own CM instead,
// through the link's helper (verbs: OpCMListen ...), and its events come
// back to the session as the software CM's do: the library sees one
// connection manager. The QP a connection names is the instance's device
// QP; the attributes its transitions take are rdma_init_qp_attr's, which
// the events carry (the peer's QPN, GID, MTU, the PSN to send from and the
// one to expect), and the library applies through the engine as before.

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/verbs"
)

// cmDevice is what the device CM asks of a verbs link's device:
// *verbs.Device, or a fake in tests.
type cmDevice interface {
	CMOpen(func(verbs.CMEvent)) error
	CMListen(a verbs.CMAddr, backlog uint32) (uint32, uint16, error)
	CMConnect(verbs.CMConnectParam) (uint32, error)
	CMAccept(id, qpn uint32, responderResources, initiatorDepth, rnrRetry uint8, pdata []byte) error
	CMReject(id uint32, pdata []byte) error
	CMEstablish(id uint32) error
	CMDisconnect(id uint32) error
	CMDestroy(id uint32) error
	CMQPAttr(id, state uint32) (verbs.QPAttr, error)
	cmUDDevice // cm_device_ud.go
}

// cmClient is a session as the device CM sees it (cmSession).
type cmClient interface {
	Emit(proto.CMEvent)
	Charge(connmgr.Resource) error
	Uncharge(connmgr.Resource)
}

// devConnKind says what a device CM id is.
type devConnKind uint8

const (
	devListener  devConnKind = iota + 1
	devDialled               // this side's connect
	devRequested             // a request to one of the session's listeners
)

// devConn is one id of the helper's, held for a session.
type devConn struct {
	c        cmClient
	id       uint32 // the session's id for it
	hid      uint32 // the helper's
	kind     devConnKind
	listener uint32 // a request's listener (the session's id)
	rd       uint8  // READs and atomics in flight this side asked
	replied  bool   // a dialled connection's reply came
	est      bool   // established
	closing  bool   // this side disconnected: the peer's answer is DisconnectDone
	ud       bool   // a UD id's: SIDR (cm_device_ud.go)
}

type cmKey struct {
	c  cmClient
	id uint32
}

// Limits of a session's device CM ids, as the software CM's.
const (
	devCMMaxListeners = 64
	devCMBacklog      = 128
	devCMTimeoutMs    = 5000
	devCMQueue        = 1024
)

// deviceCM is one verbs link's device CM as the daemon's sessions use it.
type deviceCM struct {
	link string
	dev  cmDevice
	gids func() [][16]byte // the port's GID table
	mtu  uint8             // the port's active MTU (enum ibv_mtu)
	log  *slog.Logger

	events chan verbs.CMEvent // from the helper's reader to the worker

	mu     sync.Mutex
	byHID  map[uint32]*devConn
	byID   map[cmKey]*devConn
	nextID uint32
}

// newDeviceCM opens dev's CM and starts the worker that turns its events
// into the sessions'.
func newDeviceCM(link string, dev cmDevice, gids func() [][16]byte, mtu uint8, log *slog.Logger) (*deviceCM, error) {
	m := &deviceCM{link: link, dev: dev, gids: gids, mtu: mtu, log: log, events: make(chan verbs.CMEvent, devCMQueue),
		byHID: map[uint32]*devConn{}, byID: map[cmKey]*devConn{}}
	if err := dev.CMOpen(func(e verbs.CMEvent) { m.events <- e }); err != nil {
		return nil, proto.Errorf(proto.CodeState, "rdma_cm on verbs link %s: %v", link, err)
	}
	// The worker calls the device (rdma_init_qp_attr, the DREP) while the
	// helper may be pushing more events: the reader only queues them.
	go func() {
		for e := range m.events {
			m.onEvent(e)
		}
	}()
	return m, nil
}

func (m *deviceCM) fail(err error, what string) error {
	return proto.Errorf(proto.CodeOf(verbsErr(err)), "%s on verbs link %s: %v", what, m.link, err)
}

// verbsErr gives a device's refusal its command code: EINVAL and ENOENT
// are the caller's, EADDRINUSE busy, EACCES a permission, the rest
// internal.
func verbsErr(err error) error {
	var ve *verbs.Error
	code := proto.CodeInternal
	if errors.As(err, &ve) {
		switch ve.Errno {
		case 22: // EINVAL
			code = proto.CodeInvalid
		case 2: // ENOENT
			code = proto.CodeNotFound
		case 98: // EADDRINUSE
			code = proto.CodeBusy
		case 13, 1: // EACCES, EPERM
			code = proto.CodePermission
		case 18, 19, 99, 101, 113: // EXDEV, ENODEV, EADDRNOTAVAIL, ENETUNREACH, EHOSTUNREACH
			code = proto.CodeState
		}
	}
	return proto.Errorf(code, "%v", err)
}

// conn finds the session's id; m.mu is held.
func (m *deviceCM) conn(c cmClient, id uint32) (*devConn, error) {
	if dc := m.byID[cmKey{c, id}]; dc != nil {
		return dc, nil
	}
	return nil, proto.Errorf(proto.CodeNotFound, "no connection %d: it was rejected, timed out or ended (its event says which)", id)
}

func (m *deviceCM) add(dc *devConn) {
	m.byHID[dc.hid] = dc
	m.byID[cmKey{dc.c, dc.id}] = dc
}

// drop forgets dc, gives back its charge and destroys the helper's id;
// m.mu is held.
func (m *deviceCM) drop(dc *devConn) {
	if m.byHID[dc.hid] != dc {
		return
	}
	delete(m.byHID, dc.hid)
	delete(m.byID, cmKey{dc.c, dc.id})
	if dc.kind == devListener {
		dc.c.Uncharge(connmgr.Listeners)
	} else {
		dc.c.Uncharge(connmgr.Connections)
	}
	if err := m.dev.CMDestroy(dc.hid); err != nil {
		m.log.Debug("rdma_destroy_id", "link", m.link, "id", dc.hid, "err", err)
	}
}

// Listen listens on req.Port of the device's addresses (0: the kernel
// picks one) for c. Ports below 1024 are the host's privileged ones, as
// the kernel's rdma_cm keeps them (CAP_NET_BIND_SERVICE): only root's
// sessions take them (privileged).
func (m *deviceCM) Listen(c cmClient, req proto.CMListenReq, privileged bool) (uint16, error) {
	if req.ID >= proto.CMDaemonIDBase {
		return 0, proto.Errorf(proto.CodeInvalid, "listener id %d: the library's ids are below %d", req.ID, uint32(proto.CMDaemonIDBase))
	}
	if req.Port != 0 && req.Port < 1024 && !privileged {
		return 0, proto.Errorf(proto.CodePermission, "port %d is below 1024: on a verbs uplink the port space is the host kernel's, whose ports below 1024 are root's; pick a port of 1024 or above, or 0 for a free one", req.Port)
	}
	backlog := req.Backlog
	switch {
	case backlog == 0:
		backlog = devCMBacklog
	case backlog < 0 || backlog > 4096:
		return 0, proto.Errorf(proto.CodeInvalid, "backlog %d: 1 to 4096 requests may wait for an answer", backlog)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byID[cmKey{c, req.ID}] != nil {
		return 0, proto.Errorf(proto.CodeInvalid, "id %d is in use on this connection", req.ID)
	}
	n := 0
	for k, dc := range m.byID {
		if k.c == c && dc.kind == devListener {
			n++
		}
	}
	if n >= devCMMaxListeners {
		return 0, proto.Errorf(proto.CodeLimit, "this process listens on %d ports already, the most it may", n)
	}
	if err := c.Charge(connmgr.Listeners); err != nil {
		return 0, err
	}
	listen := m.dev.CMListen
	if req.UD {
		listen = m.dev.CMUDListen // SIDR requests (cm_device_ud.go)
	}
	hid, port, err := listen(verbs.CMAddr{Port: req.Port}, uint32(backlog))
	if err != nil {
		c.Uncharge(connmgr.Listeners)
		return 0, m.fail(err, fmt.Sprintf("listening on port %d", req.Port))
	}
	if !privileged && port < 1024 {
		m.dev.CMDestroy(hid)
		c.Uncharge(connmgr.Listeners)
		return 0, proto.Errorf(proto.CodePermission, "the kernel gave port %d, below 1024: pick a port of 1024 or above", port)
	}
	m.add(&devConn{c: c, id: req.ID, hid: hid, kind: devListener, ud: req.UD})
	return port, nil
}

// CancelListen stops c's listener id.
func (m *deviceCM) CancelListen(c cmClient, id uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dc, err := m.conn(c, id)
	if err != nil || dc.kind != devListener {
		return proto.Errorf(proto.CodeNotFound, "no listener %d on this connection", id)
	}
	m.drop(dc)
	return nil
}

// source picks the port's GID a connection to dst leaves from: one of
// dst's family (IPv4 as ::ffff:a.b.c.d), dst itself if it is one of them.
func (m *deviceCM) source(dst [16]byte) (uint8, [16]byte, bool) {
	v4 := netip.AddrFrom16(dst).Is4In6()
	var idx uint8
	var gid [16]byte
	found := false
	for i, g := range m.gids() {
		if g == ([16]byte{}) || netip.AddrFrom16(g).Is4In6() != v4 || i > 255 {
			continue
		}
		if g == dst {
			return uint8(i), g, true
		}
		if !found {
			idx, gid, found = uint8(i), g, true
		}
	}
	return idx, gid, found
}

// Resolve says which of the port's GIDs a connection to req.Addr leaves
// from; the device's CM resolves the route itself when it connects.
func (m *deviceCM) Resolve(req proto.CMResolveReq) (proto.CMResolveResp, error) {
	if len(req.Addr) != 16 {
		return proto.CMResolveResp{}, proto.Errorf(proto.CodeInvalid, "address of %d bytes: a GID has 16 (IPv4 as ::ffff:a.b.c.d)", len(req.Addr))
	}
	idx, gid, ok := m.source([16]byte(req.Addr))
	if !ok {
		return proto.CMResolveResp{}, proto.Errorf(proto.CodeState, "verbs link %s has no address of %s's family: `vrdma link show %s` lists its GIDs", m.link, netip.AddrFrom16([16]byte(req.Addr)).Unmap(), m.link)
	}
	return proto.CMResolveResp{LocalAddr: gid[:], SGIDIndex: idx, MTU: m.mtu}, nil
}

// Connect dials req.Addr:req.Port through the device's CM for c's device
// QP qpn (in RESET or INIT).
func (m *deviceCM) Connect(c cmClient, req proto.CMConnectReq, qpn uint32) (proto.CMConnectResp, error) {
	return m.connect(c, req, qpn, false)
}

// connect dials for an RC QP, or for a UD one (ud: a SIDR_REQ).
func (m *deviceCM) connect(c cmClient, req proto.CMConnectReq, qpn uint32, ud bool) (proto.CMConnectResp, error) {
	var none proto.CMConnectResp
	switch {
	case req.ID >= proto.CMDaemonIDBase:
		return none, proto.Errorf(proto.CodeInvalid, "connection id %d: the library's ids are below %d", req.ID, uint32(proto.CMDaemonIDBase))
	case len(req.Addr) != 16 || [16]byte(req.Addr) == [16]byte{}:
		return none, proto.Errorf(proto.CodeInvalid, "address of %d bytes: name the peer's address (16 bytes, IPv4 as ::ffff:a.b.c.d)", len(req.Addr))
	case req.Port == 0:
		return none, proto.Errorf(proto.CodeInvalid, "port 0: name the port the peer listens on")
	case len(req.PrivateData) > 56 && !ud:
		return none, proto.Errorf(proto.CodeInvalid, "private data of %d bytes: rdma_cm's request carries at most 56", len(req.PrivateData))
	}
	idx, gid, ok := m.source([16]byte(req.Addr))
	if !ok {
		return none, proto.Errorf(proto.CodeState, "verbs link %s has no address of %s's family", m.link, netip.AddrFrom16([16]byte(req.Addr)).Unmap())
	}
	timeout := req.TimeoutMs
	if timeout == 0 || timeout > 600000 {
		timeout = devCMTimeoutMs
	}
	rd := min(req.RdAtomic, 16)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byID[cmKey{c, req.ID}] != nil {
		return none, proto.Errorf(proto.CodeInvalid, "id %d is in use on this connection", req.ID)
	}
	if err := c.Charge(connmgr.Connections); err != nil {
		return none, err
	}
	dial := m.dev.CMConnect
	if ud {
		dial = m.dev.CMUDConnect
	}
	hid, err := dial(verbs.CMConnectParam{TimeoutMs: timeout, QPN: qpn, Dst: verbs.CMAddr{Addr: [16]byte(req.Addr), Port: req.Port},
		ResponderResources: rd, InitiatorDepth: rd, RetryCount: 7, RNRRetryCount: 7, PrivateData: req.PrivateData})
	if err != nil {
		c.Uncharge(connmgr.Connections)
		return none, m.fail(err, "connecting")
	}
	m.add(&devConn{c: c, id: req.ID, hid: hid, kind: devDialled, rd: rd, ud: ud})
	return proto.CMConnectResp{LocalAddr: gid[:], SGIDIndex: idx}, nil
}

// Accept answers a request with the REP naming c's device QP qpn (in RTR
// or RTS), or confirms a reply with the RTU (the dialling side). qpn gives
// the number of the QP the request names, refusing one that is not of the
// type that answers a request of the kind (RC, or UD for SIDR).
func (m *deviceCM) Accept(c cmClient, req proto.CMAcceptReq, qpn func(want abi.QPType) (uint32, error)) error {
	if len(req.PrivateData) > 196 {
		return proto.Errorf(proto.CodeInvalid, "private data of %d bytes: rdma_cm's reply carries at most 196", len(req.PrivateData))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dc, err := m.conn(c, req.ID)
	if err != nil {
		return err
	}
	switch {
	case dc.ud:
		return m.acceptUD(dc, req, qpn)
	case dc.kind == devRequested && !dc.est:
		n, err := qpn(abi.QPTypeRC)
		if err != nil {
			return err
		}
		rd := min(req.RdAtomic, 16)
		if err := m.dev.CMAccept(dc.hid, n, rd, rd, 7, req.PrivateData); err != nil {
			return m.fail(err, "accepting")
		}
	case dc.kind == devDialled && dc.replied && !dc.est:
		if err := m.dev.CMEstablish(dc.hid); err != nil {
			return m.fail(err, "confirming the reply")
		}
		dc.est = true
	default:
		return proto.Errorf(proto.CodeState, "connection %d: accept answers a request (listener side) or a reply (dialling side)", req.ID)
	}
	return nil
}

// Reject refuses a request (or a reply) with private data.
func (m *deviceCM) Reject(c cmClient, req proto.CMRejectReq) error {
	if len(req.PrivateData) > 148 {
		return proto.Errorf(proto.CodeInvalid, "private data of %d bytes: rdma_cm's reject carries at most 148", len(req.PrivateData))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dc, err := m.conn(c, req.ID)
	if err != nil {
		return err
	}
	if dc.kind == devListener || dc.est {
		return proto.Errorf(proto.CodeState, "connection %d is established or a listener: end it with disconnect", req.ID)
	}
	if dc.ud && len(req.PrivateData) > sidrRepPrivate {
		return proto.Errorf(proto.CodeInvalid, "private data of %d bytes: a SIDR_REP carries at most %d", len(req.PrivateData), sidrRepPrivate)
	}
	if err := m.dev.CMReject(dc.hid, req.PrivateData); err != nil {
		return m.fail(err, "rejecting")
	}
	m.drop(dc)
	return nil
}

// Disconnect ends an established connection: the DREQ; the peer's DREP
// is DisconnectDone.
func (m *deviceCM) Disconnect(c cmClient, req proto.CMDisconnectReq) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dc, err := m.conn(c, req.ID)
	if err != nil {
		return err
	}
	if dc.kind == devListener || dc.closing {
		return proto.Errorf(proto.CodeState, "connection %d is not established", req.ID)
	}
	dc.closing = true
	if err := m.dev.CMDisconnect(dc.hid); err != nil {
		return m.fail(err, "disconnecting")
	}
	return nil
}

// CloseSession destroys what c held: its listeners and connections (the
// kernel ends them with the peers).
func (m *deviceCM) CloseSession(c cmClient) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, dc := range m.byID {
		if k.c == c {
			m.drop(dc)
		}
	}
}

// attrs returns rdma_init_qp_attr's RTR and RTS attributes of the
// helper's id hid.
func (m *deviceCM) attrs(hid uint32) (rtr, rts verbs.QPAttr, err error) {
	if rtr, err = m.dev.CMQPAttr(hid, verbs.QPStateRTR); err != nil {
		return
	}
	rts, err = m.dev.CMQPAttr(hid, verbs.QPStateRTS)
	return
}

// peerEvent is a request's or a reply's event: the peer's QP and what
// this side's QP must take (the PSN to send from, the one to expect).
func peerEvent(t proto.CMEventType, id uint32, e verbs.CMEvent, rtr, rts verbs.QPAttr, rd uint8) proto.CMEvent {
	local := rtr.RQPSN
	return proto.CMEvent{Type: t, ID: id, QPType: uint8(abi.QPTypeRC), GID: append([]byte(nil), rtr.DGID[:]...), QPN: e.QPN,
		PSN: rts.SQPSN, LocalPSN: &local, MTU: uint8(rtr.PathMTU), RdAtomic: rd, SGIDIndex: rtr.SGIDIndex,
		LocalAddr: append([]byte(nil), e.Local.Addr[:]...), LocalPort: e.Local.Port,
		RemoteAddr: append([]byte(nil), e.Peer.Addr[:]...), RemotePort: e.Peer.Port, PrivateData: e.PrivateData}
}

// onEvent turns one of the helper's events into the session's.
func (m *deviceCM) onEvent(e verbs.CMEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Event == verbs.CMConnectRequest {
		if e.UD != nil {
			m.onUDRequest(e) // cm_device_ud.go
			return
		}
		m.onRequest(e)
		return
	}
	dc := m.byHID[e.ID]
	if dc == nil {
		return // destroyed meanwhile
	}
	if dc.ud && m.onUDEvent(dc, e) {
		return
	}
	switch e.Event {
	case verbs.CMConnectResponse:
		if dc.kind != devDialled || dc.replied {
			return
		}
		rtr, rts, err := m.attrs(e.ID)
		if err != nil {
			m.dev.CMReject(dc.hid, nil)
			dc.c.Emit(proto.CMEvent{Type: proto.CMEventUnreachable, ID: dc.id, Text: "rdma_init_qp_attr: " + err.Error()})
			m.drop(dc)
			return
		}
		dc.replied = true
		dc.c.Emit(peerEvent(proto.CMEventReply, dc.id, e, rtr, rts, min(e.ResponderResources, dc.rd)))
	case verbs.CMEstablished:
		if dc.kind == devRequested && !dc.est {
			dc.est = true
			dc.c.Emit(proto.CMEvent{Type: proto.CMEventEstablished, ID: dc.id})
		}
	case verbs.CMRejected:
		dc.c.Emit(proto.CMEvent{Type: proto.CMEventRejected, ID: dc.id, Reason: uint16(e.Status), Text: "rejected by the peer", PrivateData: e.PrivateData})
		m.drop(dc)
	case verbs.CMAddrError, verbs.CMRouteError, verbs.CMConnectError, verbs.CMUnreachable:
		dc.c.Emit(proto.CMEvent{Type: proto.CMEventUnreachable, ID: dc.id, Text: fmt.Sprintf("%s (status %d) on verbs link %s", e.Event, e.Status, m.link)})
		m.drop(dc)
	case verbs.CMDisconnected, verbs.CMDeviceRemoval:
		if dc.kind == devListener {
			return
		}
		t := proto.CMEventDisconnected
		if dc.closing {
			t = proto.CMEventDisconnectDone
		} else if e.Event == verbs.CMDisconnected {
			m.dev.CMDisconnect(dc.hid) // the DREP: the library sends none once the peer ended it
		}
		dc.c.Emit(proto.CMEvent{Type: t, ID: dc.id, PrivateData: e.PrivateData})
		m.drop(dc)
	}
}

// onRequest hands a connection request to its listener's session, with
// the attributes its QP takes; m.mu is held.
func (m *deviceCM) onRequest(e verbs.CMEvent) {
	l := m.byHID[e.Listener]
	refuse := func() {
		m.dev.CMReject(e.ID, nil)
		m.dev.CMDestroy(e.ID)
	}
	if l == nil || l.kind != devListener {
		refuse()
		return
	}
	if err := l.c.Charge(connmgr.Connections); err != nil {
		m.log.Info("a request on a verbs uplink refused", "link", m.link, "reason", err)
		refuse()
		return
	}
	rtr, rts, err := m.attrs(e.ID)
	if err != nil {
		l.c.Uncharge(connmgr.Connections)
		refuse()
		return
	}
	m.nextID++
	id := proto.CMDaemonIDBase + m.nextID%(1<<31-1)
	dc := &devConn{c: l.c, id: id, hid: e.ID, kind: devRequested, listener: l.id}
	m.add(dc)
	ev := peerEvent(proto.CMEventRequest, id, e, rtr, rts, e.InitiatorDepth)
	ev.Listener = l.id
	l.c.Emit(ev)
}
