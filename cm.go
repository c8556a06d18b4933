package vrdma

// The connection manager, like rdma_cm: a Listener on a port of the host,
// Dial from a QP to an adapter's address and port, Accept or Reject with
// private data both ways, Disconnect. It fills in every attribute a QP
// needs (the peer's GID, QPN and first PSN, the path MTU, the GID to send
// from, how many RDMA READs each side may have in flight), so programs
// never exchange them by hand, whatever the path between the two.
//
//	l, _ := dev.Listen(7471)
//	req, _ := l.Accept(ctx)
//	conn, _ := req.Accept(ctx, qp, []byte("welcome"))
//
//	conn, err := dev.Dial(ctx, qp, netip.MustParseAddr("10.0.0.2"), 7471, []byte("hello"))
//	var rej *vrdma.RejectError
//	if errors.As(err, &rej) { ... rej.Reason, rej.Text, rej.PrivateData ... }
//
// The daemons carry the IBTA CM's messages (REQ, REP, RTU, REJ, DREQ,
// DREP) between them; see docs/design/connection-manager.md.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/proto"
)

// Connection manager errors; every error of the connection manager matches
// one of them, or one of the package's other sentinels, with errors.Is.
var (
	ErrTimeout             = errors.New("timed out")
	ErrRejected            = errors.New("connection rejected")
	ErrUnreachable         = errors.New("peer unreachable")
	ErrPrivateDataTooLarge = errors.New("private data too large")
)

// RejectReason is why a connection was rejected: an IBTA CM reject reason.
type RejectReason = cm.Reason

const (
	RejectNoQP                 = cm.RejectNoQP                 // a QP could not be connected
	RejectNoResources          = cm.RejectNoResources          // the listener's backlog is full
	RejectTimeout              = cm.RejectTimeout              // the other side did not answer in time
	RejectInvalidCommID        = cm.RejectInvalidCommID        // the connection was unknown: it timed out
	RejectNoListener           = cm.RejectInvalidServiceID     // nobody listens on the port
	RejectInvalidTransportType = cm.RejectInvalidTransportType // the QP type cannot be connected
	RejectInvalidGID           = cm.RejectInvalidGID           // the address is not an adapter of that host
	RejectInvalidMTU           = cm.RejectInvalidMTU           // no path MTU both sides support
	RejectConsumer             = cm.RejectConsumer             // the application rejected (ConnRequest.Reject)
)

// RejectError is a connection the other side (or its daemon) refused: the
// reason, its text, and the private data that came with the refusal.
// errors.Is(err, ErrRejected) holds, and errors.Is(err, ErrTimeout) and
// errors.Is(err, context.DeadlineExceeded) too when the reason is
// RejectTimeout.
type RejectError struct {
	Reason      RejectReason
	Text        string
	PrivateData []byte
}

func (e *RejectError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("vrdma: connection rejected: %v", e.Reason)
	}
	return fmt.Sprintf("vrdma: connection rejected (%v): %s", e.Reason, e.Text)
}

// Is makes a RejectError match ErrRejected, and ErrTimeout and
// context.DeadlineExceeded for a timeout.
func (e *RejectError) Is(target error) bool {
	return target == ErrRejected || (e.Reason == RejectTimeout && (target == ErrTimeout || target == context.DeadlineExceeded))
}

// Timeout reports whether the other side gave up waiting.
func (e *RejectError) Timeout() bool { return e.Reason == RejectTimeout }

// cmBacklog is how many requests may wait for a listener's answer.
const cmBacklog = 128

// cmState is a device's listeners and connections, by the ids the daemon
// knows them by.
type cmState struct {
	mu        sync.Mutex
	nextID    uint32
	listeners map[uint32]*Listener
	conns     map[uint32]*cmEndpoint
}

// cmEndpoint is a connection or request being set up or established: the
// events the daemon sends about it, and its Conn.
type cmEndpoint struct {
	events chan proto.CMEvent
	conn   *Conn
}

// register gives a new listener or connection an id. l is nil for a
// connection.
func (d *Device) cmRegister(l *Listener) (uint32, *cmEndpoint) {
	s := &d.cm
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listeners == nil {
		s.listeners, s.conns = map[uint32]*Listener{}, map[uint32]*cmEndpoint{}
	}
	for {
		s.nextID++
		if s.nextID >= proto.CMDaemonIDBase {
			s.nextID = 1
		}
		if s.listeners[s.nextID] == nil && s.conns[s.nextID] == nil {
			break
		}
	}
	id := s.nextID
	if l != nil {
		s.listeners[id] = l
		return id, nil
	}
	ep := &cmEndpoint{events: make(chan proto.CMEvent, 8)}
	s.conns[id] = ep
	return id, ep
}

func (d *Device) cmForget(id uint32) {
	d.cm.mu.Lock()
	delete(d.cm.conns, id)
	delete(d.cm.listeners, id)
	d.cm.mu.Unlock()
}

// cmDispatch receives the daemon's connection manager events. It runs on
// the connection's reader and never blocks.
func (d *Device) cmDispatch(ev proto.CMEvent) {
	s := &d.cm
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		return
	}
	if ev.Type == proto.CMEventRequest {
		r := newConnRequest(d, ev)
		s.conns[ev.ID] = r.ep
		if l := s.listeners[ev.Listener]; l != nil {
			select {
			case l.reqs <- r:
			default: // beyond the backlog the daemon enforces: it times out
			}
		}
		return
	}
	ep := s.conns[ev.ID]
	if ep == nil {
		return
	}
	switch ev.Type {
	case proto.CMEventRejected, proto.CMEventTimeout, proto.CMEventUnreachable, proto.CMEventDisconnected, proto.CMEventDisconnectDone:
		delete(s.conns, ev.ID)
		if ep.conn != nil {
			ep.conn.end(ev)
		}
	}
	select {
	case ep.events <- ev:
	default:
	}
}

// cmLost ends every connection: the daemon went away.
func (d *Device) cmLost() {
	s := &d.cm
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ep := range s.conns {
		if ep.conn != nil {
			ep.conn.end(proto.CMEvent{Type: proto.CMEventDisconnected, Text: "the vrdma daemon went away"})
		}
		delete(s.conns, id)
	}
}

// Listener receives connection requests on a port of the host (the port
// space is the host's, as rdma_cm's is the TCP port space).
type Listener struct {
	d      *Device
	id     uint32
	port   uint16
	reqs   chan *ConnRequest
	closed chan struct{}
	once   sync.Once
}

// Listen listens for connection requests to port on the device's adapter
// (rdma_bind_addr and rdma_listen). Port 0 picks a free port (Port says
// which). A port another listener of the host has is refused with an
// error matching ErrBusy.
func (d *Device) Listen(port uint16) (*Listener, error) {
	l := &Listener{d: d, reqs: make(chan *ConnRequest, cmBacklog), closed: make(chan struct{})}
	l.id, _ = d.cmRegister(l)
	var r proto.CMListenResp
	if _, err := d.c.call(proto.OpCMListen, proto.CMListenReq{ID: l.id, Port: port, Backlog: cmBacklog}, &r); err != nil {
		d.cmForget(l.id)
		return nil, err
	}
	l.port = r.Port
	return l, nil
}

// Port returns the port the listener has.
func (l *Listener) Port() uint16 { return l.port }

// Accept waits for the next connection request (RDMA_CM_EVENT_CONNECT_REQUEST).
// The caller must answer it, with ConnRequest.Accept or Reject, before the
// requester's timeout.
func (l *Listener) Accept(ctx context.Context) (*ConnRequest, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.closed:
		return nil, errorf("cm_listen", ErrClosed, "the listener on port %d is closed", l.port)
	case <-ctx.Done():
		return nil, ctxError("cm_listen", ctx, fmt.Sprintf("no connection request on port %d", l.port))
	case <-l.d.c.dead:
		return nil, &Error{Op: "cm_listen", Kind: ErrDeviceFatal, Err: l.d.c.deadErr, Msg: "the vrdma daemon closed the connection"}
	}
}

// Close stops listening. Requests not answered yet are rejected with
// RejectNoListener; connections accepted stay.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.closed)
		l.d.cmForget(l.id)
		select {
		case <-l.d.c.dead:
			return
		default:
		}
		_, err = l.d.c.call(proto.OpCMCancelListen, proto.CMCancelListenReq{ID: l.id}, nil)
		if errors.Is(err, ErrDeviceFatal) {
			err = nil
		}
	})
	return err
}

// ConnRequest is a connection request to a listener.
type ConnRequest struct {
	RemoteAddr  netip.Addr // the requester's adapter address (its GID; IPv4 unmapped)
	RemotePort  uint16     // the requester's port (informational, as rdma_cm's source port)
	LocalAddr   netip.Addr // the address the request was sent to
	LocalPort   uint16     // the listener's port
	QPType      ibv.QPType // the type of QP the requester connects (RC or UC)
	PrivateData []byte     // what the requester sent with the request (at most 56 bytes; from another host zero-padded to 56, as rdma_cm hands it up)

	d        *Device
	id       uint32
	ep       *cmEndpoint
	peer     Endpoint
	mtu      ibv.MTU
	rdAtomic uint8
	sgid     uint8
	answered atomic.Bool
}

func newConnRequest(d *Device, ev proto.CMEvent) *ConnRequest {
	return &ConnRequest{
		RemoteAddr: addrOf(ev.RemoteAddr), RemotePort: ev.RemotePort, LocalAddr: addrOf(ev.LocalAddr), LocalPort: ev.LocalPort,
		QPType: ibv.QPType(ev.QPType), PrivateData: ev.PrivateData,
		d: d, id: ev.ID, ep: &cmEndpoint{events: make(chan proto.CMEvent, 8)},
		peer: Endpoint{GID: gidOf(ev.GID), QPN: ev.QPN, PSN: ev.PSN}, mtu: ibv.MTU(ev.MTU), rdAtomic: ev.RdAtomic, sgid: ev.SGIDIndex,
	}
}

// Accept connects qp (in RESET, of the request's type) to the requester's
// QP, sends the reply with privateData (at most 196 bytes) and waits for
// the requester's confirmation: then both QPs are in RTS. A nil o is
// DefaultConnectOptions; the connection manager sets its GIDIndex,
// PathMTU and MaxRdAtomic (the smaller of o's and the requester's). If
// the connection fails after qp was connected, qp is left in ERR.
func (r *ConnRequest) Accept(ctx context.Context, qp *QP, privateData []byte) (*Conn, error) {
	return r.AcceptWith(ctx, qp, privateData, nil)
}

// AcceptWith is Accept with connection options.
func (r *ConnRequest) AcceptWith(ctx context.Context, qp *QP, privateData []byte, o *ConnectOptions) (*Conn, error) {
	const op = "cm_accept"
	if r.QPType == ibv.UD {
		return r.acceptUD(qp, privateData)
	}
	if err := checkPrivateData(op, cm.TypeREP, privateData); err != nil {
		return nil, err
	}
	if qp == nil || qp.d != r.d {
		return nil, errorf(op, ErrInvalidArgument, "the QP must be one of the device the listener is on")
	}
	if qp.typ != r.QPType {
		return nil, errorf(op, ErrInvalidArgument, "the request is for a %v QP and this QP is %v", r.QPType, qp.typ)
	}
	if st := qp.State(); st != ibv.QPSReset {
		return nil, errorf(op, ErrInvalidState, "the QP is in %v: the connection manager takes a QP from RESET to RTS; create a new QP or modify it to RESET", st)
	}
	if !r.answered.CompareAndSwap(false, true) {
		return nil, errorf(op, ErrInvalidState, "the request was answered already")
	}
	select {
	case ev := <-r.ep.events: // the requester gave up, or the listener closed
		return nil, cmFailure(op, ev, r.RemoteAddr, r.LocalPort)
	default:
	}
	opts := connectOptions(o)
	opts.GIDIndex, opts.PathMTU, opts.MaxRdAtomic = r.sgid, r.mtu, min(opts.MaxRdAtomic, r.rdAtomic)
	c := newConn(r.d, r.id, qp, r.ep)
	c.localAddr, c.localPort, c.remoteAddr, c.remotePort, c.privateData = r.LocalAddr, r.LocalPort, r.RemoteAddr, r.RemotePort, r.PrivateData
	if err := qp.cmConnect(r.peer, &opts); err != nil {
		r.d.cmAbandon(r.id, RejectNoQP, "the listener could not connect its QP to the requester's")
		return nil, err
	}
	req := proto.CMAcceptReq{ID: r.id, QP: qp.handle, PSN: qp.psn, PrivateData: privateData, RdAtomic: opts.MaxRdAtomic}
	if _, err := r.d.c.call(proto.OpCMAccept, req, nil); err != nil {
		failQP(qp)
		return nil, r.d.cmAnswerFailed(ctx, op, err, r.ep, r.RemoteAddr, r.LocalPort)
	}
	ev, err := r.d.cmWait(ctx, op, r.id, r.ep, fmt.Sprintf("no confirmation from the requester at %s", r.RemoteAddr))
	if err != nil {
		failQP(qp)
		return nil, err
	}
	if ev.Type != proto.CMEventEstablished {
		failQP(qp)
		return nil, cmFailure(op, ev, r.RemoteAddr, r.LocalPort)
	}
	return c, nil
}

// Reject refuses the request with reason (a text for the requester, at
// most 128 bytes; its RejectError's Text) and privateData (at most 148
// bytes; its PrivateData). The reason code is RejectConsumer.
func (r *ConnRequest) Reject(reason string, privateData []byte) error {
	const op = "cm_reject"
	if err := checkPrivateData(op, cm.TypeREJ, privateData); err != nil {
		return err
	}
	if len(reason) > cm.MaxRejectText {
		return errorf(op, ErrInvalidArgument, "a reason of %d bytes: at most %d", len(reason), cm.MaxRejectText)
	}
	if !r.answered.CompareAndSwap(false, true) {
		return errorf(op, ErrInvalidState, "the request was answered already")
	}
	r.d.cmForget(r.id)
	_, err := r.d.c.call(proto.OpCMReject, proto.CMRejectReq{ID: r.id, Text: reason, PrivateData: privateData}, nil)
	return err
}

// Conn is an established connection: its QP is in RTS, connected to the
// peer's.
type Conn struct {
	d  *Device
	id uint32
	qp *QP
	ep *cmEndpoint

	localAddr, remoteAddr netip.Addr
	localPort, remotePort uint16
	privateData           []byte
	remoteQPN, remoteQKey uint32 // UD (SIDR): the listener's QP

	done    chan struct{}
	endOnce sync.Once
	endEv   proto.CMEvent // how it ended; read after done
}

func newConn(d *Device, id uint32, qp *QP, ep *cmEndpoint) *Conn {
	c := &Conn{d: d, id: id, qp: qp, ep: ep, done: make(chan struct{})}
	d.cm.mu.Lock()
	ep.conn = c
	d.cm.mu.Unlock()
	return c
}

// end records how the connection ended; d.cm.mu is held.
func (c *Conn) end(ev proto.CMEvent) {
	c.endOnce.Do(func() {
		c.endEv = ev
		close(c.done) // a disconnection moved the QP to ERR: the daemon says so in its state word
	})
}

// RemoteQPN and RemoteQKey are, for a UD QP's dial, the listener's UD QP
// and its Q_Key, to address datagrams to (with RemoteAddr's GID); 0 for
// RC and UC.
func (c *Conn) RemoteQPN() uint32  { return c.remoteQPN }
func (c *Conn) RemoteQKey() uint32 { return c.remoteQKey }

// QP returns the connection's queue pair.
func (c *Conn) QP() *QP { return c.qp }

// LocalAddr and the other address methods name the two ends.
func (c *Conn) LocalAddr() netip.Addr  { return c.localAddr }
func (c *Conn) LocalPort() uint16      { return c.localPort }
func (c *Conn) RemoteAddr() netip.Addr { return c.remoteAddr }
func (c *Conn) RemotePort() uint16     { return c.remotePort }

// PrivateData returns what the peer sent when the connection was made:
// the requester's request, or the listener's reply. From another host it
// arrives zero-padded to the size its CM message holds (a REQ's 56 bytes,
// a REP's 196), as rdma_cm hands it up; from this host, as sent.
func (c *Conn) PrivateData() []byte { return c.privateData }

// Path returns how the QP reaches the peer and why (QP.Path).
func (c *Conn) Path() (path, reason string) { return c.qp.Path() }

// Done is closed when the connection has ended: either side disconnected
// (the QP is then in ERR), or the daemon went away.
func (c *Conn) Done() <-chan struct{} { return c.done }

// DisconnectData returns the private data the peer sent when it
// disconnected (its DREQ, or its answer to this side's), once Done is
// closed; nil before.
func (c *Conn) DisconnectData() []byte {
	select {
	case <-c.done:
		return c.endEv.PrivateData
	default:
		return nil
	}
}

// Disconnect ends the connection (rdma_disconnect): the QP goes to ERR
// (its outstanding work requests complete with WCWRFlushErr), the peer is
// told with privateData (at most 220 bytes) and its QP goes to ERR too.
// It waits, within ctx, for the peer's answer. A connection the peer
// ended already is no error.
func (c *Conn) Disconnect(ctx context.Context, privateData []byte) error {
	const op = "cm_disconnect"
	if err := checkPrivateData(op, cm.TypeDREQ, privateData); err != nil {
		return err
	}
	select {
	case <-c.done:
		return nil
	default:
	}
	if c.qp.typ == ibv.UD {
		return nil // SIDR leaves no connection to end
	}
	if _, err := c.d.c.call(proto.OpCMDisconnect, proto.CMDisconnectReq{ID: c.id, PrivateData: privateData}, nil); err != nil {
		if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalidState) {
			return err
		}
		// The peer ended it first: its event is on the way.
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctxError(op, ctx, fmt.Sprintf("no answer from %s to the disconnection (the QP is in ERR already)", c.remoteAddr))
	case <-c.d.c.dead:
		return nil
	}
}

// Dial connects qp (RC or UC, in RESET) to the QP that the listener on port
// of the host with adapter address addr accepts (rdma_resolve_addr,
// rdma_resolve_route and rdma_connect in one), sending privateData (at most
// 56 bytes) with the request. It returns once both QPs are in RTS. A
// refusal is a *RejectError; no answer within ctx's deadline an error
// matching ErrTimeout; a peer whose daemon cannot be reached one matching
// ErrUnreachable. If the connection fails after qp was connected, qp is
// left in ERR.
//
// A UD qp is not connected: Dial resolves the listener's UD QP (rdma_cm's
// UDP port space, a SIDR_REQ, with up to 180 bytes of private data) and
// the Conn it returns names it — RemoteAddr, RemoteQPN, RemoteQKey — for
// the datagrams qp sends; the listener answers with ConnRequest.Accept on
// a UD QP in INIT or later, whose Q_Key it hands over.
func (d *Device) Dial(ctx context.Context, qp *QP, addr netip.Addr, port uint16, privateData []byte) (*Conn, error) {
	return d.DialWith(ctx, qp, addr, port, privateData, nil)
}

// DialWith is Dial with connection options: a nil o is
// DefaultConnectOptions; the connection manager sets its GIDIndex,
// PathMTU and MaxRdAtomic (the smaller of o's and the responder's).
func (d *Device) DialWith(ctx context.Context, qp *QP, addr netip.Addr, port uint16, privateData []byte, o *ConnectOptions) (*Conn, error) {
	const op = "cm_connect"
	if qp != nil && qp.typ == ibv.UD {
		return d.dialUD(ctx, qp, addr, port, privateData)
	}
	if err := checkPrivateData(op, cm.TypeREQ, privateData); err != nil {
		return nil, err
	}
	switch {
	case qp == nil || qp.d != d:
		return nil, errorf(op, ErrInvalidArgument, "the QP must be one of this device")
	case !addr.IsValid() || addr.IsUnspecified():
		return nil, errorf(op, ErrInvalidArgument, "no address: name an address (GID) of the peer's adapter")
	case port == 0:
		return nil, errorf(op, ErrInvalidArgument, "port 0: name the port the peer listens on")
	}
	if st := qp.State(); st != ibv.QPSReset {
		return nil, errorf(op, ErrInvalidState, "the QP is in %v: the connection manager takes a QP from RESET to RTS; create a new QP or modify it to RESET", st)
	}
	opts := connectOptions(o)
	id, ep := d.cmRegister(nil)
	c := newConn(d, id, qp, ep)
	c.remoteAddr, c.remotePort = addr.Unmap(), port
	gid := addr.As16()
	req := proto.CMConnectReq{ID: id, QP: qp.handle, PSN: qp.psn, Addr: gid[:], Port: port, PrivateData: privateData,
		TimeoutMs: timeoutMillis(ctx), RdAtomic: opts.MaxRdAtomic}
	var resp proto.CMConnectResp
	if _, err := d.c.call(proto.OpCMConnect, req, &resp); err != nil {
		d.cmForget(id)
		return nil, err
	}
	c.localAddr, c.localPort = addrOf(resp.LocalAddr), resp.LocalPort
	ev, err := d.cmWait(ctx, op, id, ep, fmt.Sprintf("no reply from %s port %d", c.remoteAddr, port))
	if err != nil {
		return nil, err
	}
	if ev.Type != proto.CMEventReply {
		return nil, cmFailure(op, ev, c.remoteAddr, port)
	}
	opts.GIDIndex, opts.PathMTU, opts.MaxRdAtomic = ev.SGIDIndex, ibv.MTU(ev.MTU), min(opts.MaxRdAtomic, ev.RdAtomic)
	if err := qp.cmConnect(Endpoint{GID: gidOf(ev.GID), QPN: ev.QPN, PSN: ev.PSN}, &opts); err != nil {
		d.cmAbandon(id, RejectNoQP, "the requester could not connect its QP to the responder's")
		failQP(qp)
		return nil, err
	}
	if _, err := d.c.call(proto.OpCMAccept, proto.CMAcceptReq{ID: id}, nil); err != nil {
		failQP(qp)
		return nil, d.cmAnswerFailed(ctx, op, err, ep, c.remoteAddr, port)
	}
	c.privateData = ev.PrivateData
	return c, nil
}

// cmWait waits for the next event of connection id. If ctx ends first, the
// connection is abandoned (the peer gets a REJ with RejectTimeout).
func (d *Device) cmWait(ctx context.Context, op string, id uint32, ep *cmEndpoint, what string) (proto.CMEvent, error) {
	select {
	case ev := <-ep.events:
		return ev, nil
	case <-ctx.Done():
		d.cmAbandon(id, RejectTimeout, "the other side gave up waiting: "+ctx.Err().Error())
		return proto.CMEvent{}, ctxError(op, ctx, what)
	case <-d.c.dead:
		return proto.CMEvent{}, &Error{Op: op, Kind: ErrDeviceFatal, Err: d.c.deadErr, Msg: "the vrdma daemon closed the connection"}
	}
}

// cmAnswerFailed explains an accept (or a confirmation) the daemon
// refused: the connection ended meanwhile, and its event says why.
func (d *Device) cmAnswerFailed(ctx context.Context, op string, err error, ep *cmEndpoint, addr netip.Addr, port uint16) error {
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	select {
	case ev := <-ep.events:
		return cmFailure(op, ev, addr, port)
	case <-ctx.Done():
		return err
	case <-d.c.dead:
		return err
	}
}

// cmAbandon gives up a connection being set up; the peer is told why.
func (d *Device) cmAbandon(id uint32, reason RejectReason, text string) {
	d.cmForget(id)
	if len(text) > cm.MaxRejectText {
		text = text[:cm.MaxRejectText]
	}
	_, _ = d.c.call(proto.OpCMReject, proto.CMRejectReq{ID: id, Reason: uint16(reason), Text: text}, nil)
}

// cmFailure turns the event that ended a connection being set up into an
// error.
func cmFailure(op string, ev proto.CMEvent, addr netip.Addr, port uint16) error {
	switch ev.Type {
	case proto.CMEventRejected:
		return &RejectError{Reason: RejectReason(ev.Reason), Text: ev.Text, PrivateData: ev.PrivateData}
	case proto.CMEventTimeout:
		return &Error{Op: op, Kind: ErrTimeout, Err: context.DeadlineExceeded, Msg: fmt.Sprintf("%s port %d: %s", addr, port, ev.Text)}
	case proto.CMEventUnreachable:
		return &Error{Op: op, Kind: ErrUnreachable, Msg: fmt.Sprintf("%s port %d: %s", addr, port, ev.Text)}
	}
	return &Error{Op: op, Kind: ErrVersion, Msg: fmt.Sprintf("unexpected connection manager event %d: run a library and daemon of the same release", ev.Type)}
}

// ctxError is the error of a wait that ctx ended: ErrTimeout for a
// deadline, the context's error otherwise.
func ctxError(op string, ctx context.Context, what string) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Op: op, Kind: ErrTimeout, Err: err, Msg: what + " before the context's deadline"}
	}
	return &Error{Op: op, Err: err, Msg: what + ": " + err.Error()}
}

func checkPrivateData(op string, t cm.Type, data []byte) error {
	if max := cm.MaxPrivateData(t); len(data) > max {
		return &Error{Op: op, Kind: ErrInvalidArgument, Err: ErrPrivateDataTooLarge,
			Msg: fmt.Sprintf("private data of %d bytes: a %v carries at most %d (rdma_cm's limit); send more once connected", len(data), t, max)}
	}
	return nil
}

// timeoutMillis is what is left of ctx's deadline, for the daemon (0: none).
func timeoutMillis(ctx context.Context) uint32 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	ms := time.Until(dl).Milliseconds()
	return uint32(max(1, min(ms, 1<<31)))
}

func connectOptions(o *ConnectOptions) ConnectOptions {
	if o == nil {
		return DefaultConnectOptions()
	}
	return *o
}

// failQP moves a QP whose connection failed to ERR (best effort).
func failQP(qp *QP) { _ = qp.Modify(&ibv.QPAttr{State: ibv.QPSErr}, ibv.AttrState) }

func addrOf(b []byte) netip.Addr {
	if len(b) != 16 {
		return netip.Addr{}
	}
	return netip.AddrFrom16([16]byte(b)).Unmap()
}

func gidOf(b []byte) GID {
	var g GID
	copy(g[:], b)
	return g
}

// dialUD resolves, for UD QP qp, the listener's UD QP on port at addr
// (rdma_cm's UDP port space: a SIDR_REQ): the Conn it returns names it
// (RemoteQPN, RemoteQKey, RemoteAddr) and ends nothing when disconnected.
func (d *Device) dialUD(ctx context.Context, qp *QP, addr netip.Addr, port uint16, privateData []byte) (*Conn, error) {
	const op = "cm_connect"
	switch {
	case qp.d != d:
		return nil, errorf(op, ErrInvalidArgument, "the QP must be one of this device")
	case len(privateData) > sidrReqPrivate:
		return nil, &Error{Op: op, Kind: ErrInvalidArgument, Err: ErrPrivateDataTooLarge,
			Msg: fmt.Sprintf("private data of %d bytes: a UD dial (SIDR_REQ) carries at most %d (rdma_cm's limit)", len(privateData), sidrReqPrivate)}
	case !addr.IsValid() || addr.IsUnspecified():
		return nil, errorf(op, ErrInvalidArgument, "no address: name an address (GID) of the peer's adapter")
	case port == 0:
		return nil, errorf(op, ErrInvalidArgument, "port 0: name the port the peer listens on")
	}
	id, ep := d.cmRegister(nil)
	defer d.cmForget(id)
	c := newConn(d, id, qp, ep)
	c.remoteAddr, c.remotePort = addr.Unmap(), port
	gid := addr.As16()
	req := proto.CMConnectReq{ID: id, QP: qp.handle, Addr: gid[:], Port: port, PrivateData: privateData, TimeoutMs: timeoutMillis(ctx)}
	var resp proto.CMConnectResp
	if _, err := d.c.call(proto.OpCMConnect, req, &resp); err != nil {
		return nil, err
	}
	c.localAddr, c.localPort = addrOf(resp.LocalAddr), resp.LocalPort
	ev, err := d.cmWait(ctx, op, id, ep, fmt.Sprintf("no answer from %s port %d", c.remoteAddr, port))
	if err != nil {
		return nil, err
	}
	if ev.Type != proto.CMEventEstablished {
		return nil, cmFailure(op, ev, c.remoteAddr, port)
	}
	c.remoteQPN, c.remoteQKey, c.privateData = ev.QPN, ev.QKey, ev.PrivateData
	return c, nil
}

// acceptUD answers a UD QP's dial with qp (UD, in INIT or later: its Q_Key
// goes to the requester).
func (r *ConnRequest) acceptUD(qp *QP, privateData []byte) (*Conn, error) {
	const op = "cm_accept"
	switch {
	case qp == nil || qp.d != r.d:
		return nil, errorf(op, ErrInvalidArgument, "the QP must be one of the device the listener is on")
	case qp.typ != ibv.UD:
		return nil, errorf(op, ErrInvalidArgument, "the request is for a UD QP and this QP is %v", qp.typ)
	case len(privateData) > sidrRepPrivate:
		return nil, &Error{Op: op, Kind: ErrInvalidArgument, Err: ErrPrivateDataTooLarge,
			Msg: fmt.Sprintf("private data of %d bytes: a SIDR_REP carries at most %d", len(privateData), sidrRepPrivate)}
	}
	if !r.answered.CompareAndSwap(false, true) {
		return nil, errorf(op, ErrInvalidState, "the request was answered already")
	}
	defer r.d.cmForget(r.id)
	c := newConn(r.d, r.id, qp, r.ep)
	c.localAddr, c.localPort, c.remoteAddr, c.remotePort, c.privateData = r.LocalAddr, r.LocalPort, r.RemoteAddr, r.RemotePort, r.PrivateData
	if _, err := r.d.c.call(proto.OpCMAccept, proto.CMAcceptReq{ID: r.id, QP: qp.handle, PrivateData: privateData}, nil); err != nil {
		return nil, err
	}
	return c, nil
}

// The private data of rdma_cm's UDP port space: a SIDR_REQ's after the IP
// CM header, and a SIDR_REP's.
const (
	sidrReqPrivate = 180
	sidrRepPrivate = 136
)
