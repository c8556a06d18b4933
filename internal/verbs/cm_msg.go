package verbs

import "fmt"

// The connection manager's ops (csrc/cm.c): rdma_cm ids on the device's
// own CM (the host kernel's, through librdmacm loaded at run time), for
// connections whose QP is a device QP made with OpCreateQP. The ids carry
// no QP of librdmacm's: the REQ and REP name the QP by number, and the
// QP's transitions take rdma_init_qp_attr's attributes (OpCMQPAttr),
// applied with OpModifyQP.
const (
	OpCMOpen       Op = 32 // (empty), and the event socket → (empty)
	OpCMListen     Op = 33 // u32 backlog, u32 port, addr[16] → u32 id, u32 port
	OpCMConnect    Op = 34 // CMConnectParam → u32 id
	OpCMAccept     Op = 35 // u32 id, u32 QPN, u8 resp, u8 init, u8 rnr, u8 0, u32 n, data → (empty)
	OpCMReject     Op = 36 // u32 id, u32 n, data → (empty)
	OpCMEstablish  Op = 37 // u32 id → (empty): the RTU, once the QP is in RTS
	OpCMDisconnect Op = 38 // u32 id → (empty)
	OpCMDestroy    Op = 39 // u32 id → (empty)
	OpCMQPAttr     Op = 40 // u32 id, u32 state → u32 mask, QPAttr (OpModifyQP's 64 bytes)
	// OpCMEvent is pushed by the helper, unasked (seq 0), on the CM's
	// event socket: one rdma_cm event (CMEvent).
	OpCMEvent Op = 41
)

// Limits of the helper's connection manager.
const (
	// MaxCMIDs is the most rdma_cm ids one helper holds.
	MaxCMIDs = 1024
	// MaxCMPrivateData is the most private data a request or an event
	// carries (rdma_cm's own bounds are lower: 56 bytes in a REQ).
	MaxCMPrivateData = 256
	// CMNone is an event's Listener when it is not a connection request.
	CMNone = 0xffffffff

	cmListenSize  = 24
	cmConnectSize = 40
	cmAcceptSize  = 16
	cmRejectSize  = 8
	cmEventSize   = 72
	cmQPAttrSize  = 4 + modifySize
)

// CMEventType is an rdma_cm event (enum rdma_cm_event_type).
type CMEventType uint32

// rdma_cm's events.
const (
	CMAddrResolved CMEventType = iota
	CMAddrError
	CMRouteResolved
	CMRouteError
	CMConnectRequest
	CMConnectResponse
	CMConnectError
	CMUnreachable
	CMRejected
	CMEstablished
	CMDisconnected
	CMDeviceRemoval
	CMMulticastJoin
	CMMulticastError
	CMAddrChange
	CMTimewaitExit
)

var cmEventNames = [...]string{"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
	"CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED", "DISCONNECTED", "DEVICE_REMOVAL",
	"MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE", "TIMEWAIT_EXIT"}

func (e CMEventType) String() string {
	if int(e) < len(cmEventNames) {
		return cmEventNames[e]
	}
	return fmt.Sprintf("event %d", uint32(e))
}

// CMAddr is an address and port as the CM messages carry them: 16 bytes,
// IPv4 as ::ffff:a.b.c.d.
type CMAddr struct {
	Addr [16]byte
	Port uint16
}

// CMEvent is one rdma_cm event of an id of the helper's.
type CMEvent struct {
	ID       uint32      // the id; for a connection request a new one
	Listener uint32      // a connection request's listener, else CMNone
	Event    CMEventType // what happened
	// Status: 0; a negative errno (an error event); or, for CMRejected,
	// the IB CM's reject reason (28: the peer's application rejected).
	Status             int32
	QPN                uint32 // the peer's QPN (a request or a reply)
	ResponderResources uint8
	InitiatorDepth     uint8
	Local, Peer        CMAddr
	PrivateData        []byte
	// UD is set on the events of a UD id (cm_ud_msg.go): SIDR's.
	UD *CMUD
}

// CMConnectParam is what OpCMConnect dials: the helper resolves the
// address and the route, then sends the REQ naming QPN.
type CMConnectParam struct {
	TimeoutMs          uint32 // each of resolving the address and the route; 1..600000
	QPN                uint32 // the device QP (its number) the connection is for
	Dst                CMAddr
	ResponderResources uint8
	InitiatorDepth     uint8
	RetryCount         uint8 // at most 7
	RNRRetryCount      uint8 // at most 7 (7: for ever)
	PrivateData        []byte
}

// AppendCMListen appends an OpCMListen request: listen on port (0: the
// kernel picks one) of addr (all zero: any address of the device's).
func AppendCMListen(dst []byte, backlog uint32, a CMAddr) []byte {
	dst = AppendHeader(dst, OpCMListen, 0, 0, cmListenSize)
	dst = ne.AppendUint32(dst, backlog)
	dst = ne.AppendUint32(dst, uint32(a.Port))
	return append(dst, a.Addr[:]...)
}

// AppendCMConnect appends an OpCMConnect request.
func AppendCMConnect(dst []byte, p CMConnectParam) []byte {
	dst = AppendHeader(dst, OpCMConnect, 0, 0, cmConnectSize+len(p.PrivateData))
	dst = ne.AppendUint32(dst, p.TimeoutMs)
	dst = ne.AppendUint32(dst, p.QPN)
	dst = ne.AppendUint32(dst, uint32(p.Dst.Port))
	dst = append(dst, p.ResponderResources, p.InitiatorDepth, p.RetryCount, p.RNRRetryCount)
	dst = append(dst, p.Dst.Addr[:]...)
	dst = ne.AppendUint32(dst, uint32(len(p.PrivateData)))
	dst = ne.AppendUint32(dst, 0)
	return append(dst, p.PrivateData...)
}

// AppendCMAccept appends an OpCMAccept request: the REP naming qpn.
func AppendCMAccept(dst []byte, id, qpn uint32, responderResources, initiatorDepth, rnrRetry uint8, pdata []byte) []byte {
	dst = AppendHeader(dst, OpCMAccept, 0, 0, cmAcceptSize+len(pdata))
	dst = ne.AppendUint32(dst, id)
	dst = ne.AppendUint32(dst, qpn)
	dst = append(dst, responderResources, initiatorDepth, rnrRetry, 0)
	dst = ne.AppendUint32(dst, uint32(len(pdata)))
	return append(dst, pdata...)
}

// AppendCMReject appends an OpCMReject request.
func AppendCMReject(dst []byte, id uint32, pdata []byte) []byte {
	dst = AppendHeader(dst, OpCMReject, 0, 0, cmRejectSize+len(pdata))
	dst = ne.AppendUint32(dst, id)
	dst = ne.AppendUint32(dst, uint32(len(pdata)))
	return append(dst, pdata...)
}

// AppendCMID appends a request whose body is an id (OpCMEstablish,
// OpCMDisconnect, OpCMDestroy).
func AppendCMID(dst []byte, op Op, id uint32) []byte {
	return ne.AppendUint32(AppendHeader(dst, op, 0, 0, 4), id)
}

// AppendCMQPAttr appends an OpCMQPAttr request: rdma_init_qp_attr of id
// for state.
func AppendCMQPAttr(dst []byte, id, state uint32) []byte {
	dst = ne.AppendUint32(AppendHeader(dst, OpCMQPAttr, 0, 0, 8), id)
	return ne.AppendUint32(dst, state)
}

// ParseCMID decodes a reply that is an id (OpCMConnect) or an id and a
// port (OpCMListen, withPort).
func ParseCMID(b []byte, withPort bool) (id uint32, port uint16, err error) {
	want := 4
	if withPort {
		want = 8
	}
	if len(b) != want {
		return 0, 0, protoErrorf("a CM id reply of %d bytes, want %d", len(b), want)
	}
	id = ne.Uint32(b)
	if id >= MaxCMIDs {
		return 0, 0, protoErrorf("CM id %d is not below %d", id, MaxCMIDs)
	}
	if withPort {
		p := ne.Uint32(b[4:])
		if p == 0 || p > 0xffff {
			return 0, 0, protoErrorf("listening on port %d", p)
		}
		port = uint16(p)
	}
	return id, port, nil
}

// ParseCMQPAttr decodes an OpCMQPAttr reply: the attributes for state
// and rdma_init_qp_attr's mask of them.
func ParseCMQPAttr(b []byte, state uint32) (QPAttr, uint32, error) {
	if len(b) != cmQPAttrSize {
		return QPAttr{}, 0, protoErrorf("QP attributes of %d bytes, want %d", len(b), cmQPAttrSize)
	}
	mask := ne.Uint32(b)
	a, err := parseQPAttr(b[4:])
	if err != nil {
		return QPAttr{}, 0, err
	}
	if a.State != state {
		return QPAttr{}, 0, protoErrorf("QP attributes for state %d, asked %d", a.State, state)
	}
	return a, mask, nil
}

// parseQPAttr decodes OpModifyQP's 64-byte body (its QP handle 0), the
// inverse of AppendModifyQP.
func parseQPAttr(b []byte) (QPAttr, error) {
	var a QPAttr
	if ne.Uint32(b) != 0 {
		return a, protoErrorf("QP attributes with a QP handle %d", ne.Uint32(b))
	}
	a.State, a.Access, a.PathMTU, a.DestQPN = ne.Uint32(b[4:]), ne.Uint32(b[8:]), ne.Uint32(b[12:]), ne.Uint32(b[16:])
	a.RQPSN, a.SQPSN, a.FlowLabel = ne.Uint32(b[20:]), ne.Uint32(b[24:]), ne.Uint32(b[28:])
	copy(a.DGID[:], b[32:48])
	a.DLID = ne.Uint16(b[48:])
	t := b[50:64]
	a.SGIDIndex, a.HopLimit, a.TrafficClass, a.SL = t[0], t[1], t[2], t[3]
	a.Timeout, a.RetryCnt, a.RNRRetry, a.MinRNRTimer = t[4], t[5], t[6], t[7]
	a.MaxRdAtomic, a.MaxDestRdAtomic, a.IsGlobal = t[8], t[9], t[10] == 1
	switch {
	case a.State < QPStateInit || a.State > QPStateRTS:
		return a, protoErrorf("QP attributes for state %d", a.State)
	case a.PathMTU > 5 || a.DestQPN > 0xffffff || a.RQPSN > 0xffffff || a.SQPSN > 0xffffff || a.FlowLabel > 0xfffff:
		return a, protoErrorf("QP attributes with MTU code %d, QPN %#x, PSNs %#x and %#x, flow label %#x", a.PathMTU, a.DestQPN, a.RQPSN, a.SQPSN, a.FlowLabel)
	case t[10] > 1 || t[11] != 0 || t[12] != 0 || t[13] != 0:
		return a, protoErrorf("QP attributes with is_global %d and padding %v", t[10], t[11:])
	case a.Timeout > 31 || a.RetryCnt > 7 || a.RNRRetry > 7 || a.MinRNRTimer > 31:
		return a, protoErrorf("QP attributes with timeout %d, retries %d, RNR retries %d, RNR timer %d", a.Timeout, a.RetryCnt, a.RNRRetry, a.MinRNRTimer)
	}
	return a, nil
}

// AppendCMQPAttrReply appends an OpCMQPAttr reply's body (for tests and
// fakes): the mask, then a in OpModifyQP's layout.
func AppendCMQPAttrReply(dst []byte, mask uint32, a QPAttr) []byte {
	dst = ne.AppendUint32(dst, mask)
	return append(dst, AppendModifyQP(nil, QP{}, a)[HeaderSize:]...)
}

// AppendCMEvent appends an OpCMEvent message (the helper's push; for
// tests and fakes).
func AppendCMEvent(dst []byte, e CMEvent) []byte {
	dst = AppendHeader(dst, OpCMEvent, 0, 0, cmEventSize+len(e.PrivateData))
	for _, v := range []uint32{e.ID, e.Listener, uint32(e.Event), uint32(e.Status), e.QPN} {
		dst = ne.AppendUint32(dst, v)
	}
	dst = append(dst, e.ResponderResources, e.InitiatorDepth, 0, 0)
	return appendCMTail(dst, e)
}

// cmTailSize is what ends both kinds of CM event, before the private
// data: the local and the peer's address (u32 port, addr[16] each), u32
// the private data's length, u32 0.
const cmTailSize = 2*(4+16) + 8

// appendCMTail appends e's addresses and private data.
func appendCMTail(dst []byte, e CMEvent) []byte {
	for _, a := range []CMAddr{e.Local, e.Peer} {
		dst = ne.AppendUint32(dst, uint32(a.Port))
		dst = append(dst, a.Addr[:]...)
	}
	dst = ne.AppendUint32(dst, uint32(len(e.PrivateData)))
	dst = ne.AppendUint32(dst, 0)
	return append(dst, e.PrivateData...)
}

// parseCMTail reads the addresses and private data of a CM event from
// tail (cmTailSize bytes or more): 16-bit ports, a zero pad word and
// exactly the private data it says. what names the event in errors.
func parseCMTail(tail []byte, e *CMEvent, what string) error {
	ports := [2]uint32{ne.Uint32(tail), ne.Uint32(tail[20:])}
	copy(e.Local.Addr[:], tail[4:20])
	copy(e.Peer.Addr[:], tail[24:40])
	n, pad := ne.Uint32(tail[40:]), ne.Uint32(tail[44:])
	switch {
	case pad != 0 || ports[0] > 0xffff || ports[1] > 0xffff:
		return protoErrorf("%s %s with ports %d and %d, padding %d", what, e.Event, ports[0], ports[1], pad)
	case n > MaxCMPrivateData || int(n) != len(tail)-cmTailSize:
		return protoErrorf("%s %s says %d bytes of private data, has %d", what, e.Event, n, len(tail)-cmTailSize)
	}
	e.Local.Port, e.Peer.Port = uint16(ports[0]), uint16(ports[1])
	if n > 0 {
		e.PrivateData = append([]byte(nil), tail[cmTailSize:]...)
	}
	return nil
}

// ParseCMEvent decodes a pushed OpCMEvent message: ids in range, a
// listener only on a connection request, a known event, a status that is
// 0, a negative errno or a reject reason, 24-bit QPNs, 16-bit ports and
// exactly the private data it says.
func ParseCMEvent(msg []byte) (CMEvent, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return CMEvent{}, err
	}
	b := msg[HeaderSize:]
	if h.Op() != OpCMEvent || h.Seq() != 0 || h.Status() != 0 || len(b) < cmEventSize {
		return CMEvent{}, protoErrorf("pushed op %#x, seq %d, status %d, %d-byte body; want a CM event", h.Op(), h.Seq(), h.Status(), len(b))
	}
	var e CMEvent
	e.ID, e.Listener, e.Event = ne.Uint32(b), ne.Uint32(b[4:]), CMEventType(ne.Uint32(b[8:]))
	e.Status, e.QPN = int32(ne.Uint32(b[12:])), ne.Uint32(b[16:])
	e.ResponderResources, e.InitiatorDepth = b[20], b[21]
	switch {
	case e.ID >= MaxCMIDs:
		return CMEvent{}, protoErrorf("CM event for id %d, not below %d", e.ID, MaxCMIDs)
	case e.Event > CMTimewaitExit:
		return CMEvent{}, protoErrorf("CM event %d is not 0..%d", uint32(e.Event), CMTimewaitExit)
	case (e.Event == CMConnectRequest) != (e.Listener != CMNone) || (e.Listener != CMNone && e.Listener >= MaxCMIDs) || e.Listener == e.ID:
		return CMEvent{}, protoErrorf("CM event %s with listener %#x for id %d", e.Event, e.Listener, e.ID)
	case e.Status < -4095 || e.Status > 0xffff || (e.Status > 0 && e.Event != CMRejected):
		return CMEvent{}, protoErrorf("CM event %s with status %d", e.Event, e.Status)
	case e.QPN > 0xffffff:
		return CMEvent{}, protoErrorf("CM event %s with QPN %#x", e.Event, e.QPN)
	case b[22] != 0 || b[23] != 0:
		return CMEvent{}, protoErrorf("CM event %s with padding %d %d", e.Event, b[22], b[23])
	}
	if err := parseCMTail(b[cmEventSize-cmTailSize:], &e, "CM event"); err != nil {
		return CMEvent{}, err
	}
	return e, nil
}
