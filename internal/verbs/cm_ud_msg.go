package verbs

import "fmt"

// The connection manager's ops for UD QPs (csrc/cm_ud.c): rdma_cm ids of
// the UDP port space, whose exchange is SIDR — the dialling side's
// SIDR_REQ, the listener's SIDR_REP naming its UD QP (the kernel puts in
// its Q_Key: RDMA_UDP_QKEY for an IP address) or a rejection. The ids share
// the RC ones' table and event socket; OpCMReject (a SIDR_REP with status
// "rejected") and OpCMDestroy serve both.
const (
	OpCMUDListen  Op = 42 // as OpCMListen, for a UD id
	OpCMUDConnect Op = 43 // CMConnectParam (its QPN unused: a SIDR_REQ names none) → u32 id
	OpCMUDAccept  Op = 44 // u32 id, u32 QPN, u32 n, data → (empty): the SIDR_REP
	// OpCMUDEvent is pushed by the helper on the CM's event socket: one
	// event of a UD id, with rdma_cm's param.ud (CMEvent with UD set).
	OpCMUDEvent Op = 45
)

// RDMAUDPQKey is rdma_cm's Q_Key for the UDP port space (RDMA_UDP_QKEY):
// the one the kernel's SIDR_REP carries for an IP address.
const RDMAUDPQKey = 0x01234567

const (
	cmUDAcceptSize = 12
	cmUDEventSize  = 100
)

// CMUD is what rdma_cm's UD events carry (param.ud): on ESTABLISHED (the
// SIDR_REP) the peer's QPN and Q_Key and the address handle's attributes
// the kernel resolved to it; a request carries only private data (CMEvent).
type CMUD struct {
	QPN, QKey uint32
	AH        AHAttr
	Port      uint8 // the AH's port_num
}

// AppendCMUDAccept appends an OpCMUDAccept request: the SIDR_REP naming
// the UD QP qpn.
func AppendCMUDAccept(dst []byte, id, qpn uint32, pdata []byte) []byte {
	dst = AppendHeader(dst, OpCMUDAccept, 0, 0, cmUDAcceptSize+len(pdata))
	dst = ne.AppendUint32(dst, id)
	dst = ne.AppendUint32(dst, qpn)
	dst = ne.AppendUint32(dst, uint32(len(pdata)))
	return append(dst, pdata...)
}

// AppendCMUDEvent appends an OpCMUDEvent message (the helper's push; for
// tests and fakes). e.UD must be set.
func AppendCMUDEvent(dst []byte, e CMEvent) []byte {
	u := e.UD
	dst = AppendHeader(dst, OpCMUDEvent, 0, 0, cmUDEventSize+len(e.PrivateData))
	for _, v := range []uint32{e.ID, e.Listener, uint32(e.Event), uint32(e.Status), u.QPN, u.QKey, u.AH.FlowLabel} {
		dst = ne.AppendUint32(dst, v)
	}
	dst = ne.AppendUint16(dst, u.AH.DLID)
	g := uint8(0)
	if u.AH.IsGlobal {
		g = 1
	}
	dst = append(dst, g, u.AH.SGIDIndex, u.AH.HopLimit, u.AH.TrafficClass, u.AH.SL, u.Port)
	dst = append(dst, u.AH.DGID[:]...)
	return appendCMTail(dst, e)
}

// ParseCMUDEvent decodes a pushed OpCMUDEvent message: ids in range, a
// listener only on a connection request, an event a UD id has, a status
// that is 0, a negative errno or (UNREACHABLE) a SIDR_REP status, 24-bit
// QPNs, a 20-bit flow label, a 4-bit SL, is_global 0 or 1, 16-bit ports and
// exactly the private data it says.
func ParseCMUDEvent(msg []byte) (CMEvent, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return CMEvent{}, err
	}
	b := msg[HeaderSize:]
	if h.Op() != OpCMUDEvent || h.Seq() != 0 || h.Status() != 0 || len(b) < cmUDEventSize {
		return CMEvent{}, protoErrorf("pushed op %#x, seq %d, status %d, %d-byte body; want a UD CM event", h.Op(), h.Seq(), h.Status(), len(b))
	}
	u := &CMUD{}
	e := CMEvent{UD: u, QPN: 0}
	e.ID, e.Listener, e.Event = ne.Uint32(b), ne.Uint32(b[4:]), CMEventType(ne.Uint32(b[8:]))
	e.Status, u.QPN, u.QKey, u.AH.FlowLabel = int32(ne.Uint32(b[12:])), ne.Uint32(b[16:]), ne.Uint32(b[20:]), ne.Uint32(b[24:])
	u.AH.DLID = ne.Uint16(b[28:])
	g := b[30]
	u.AH.IsGlobal, u.AH.SGIDIndex, u.AH.HopLimit, u.AH.TrafficClass, u.AH.SL, u.Port = g == 1, b[31], b[32], b[33], b[34], b[35]
	copy(u.AH.DGID[:], b[36:52])
	switch {
	case e.ID >= MaxCMIDs:
		return CMEvent{}, protoErrorf("UD CM event for id %d, not below %d", e.ID, MaxCMIDs)
	case e.Event > CMTimewaitExit || e.Event == CMConnectResponse || e.Event == CMDisconnected:
		return CMEvent{}, protoErrorf("UD CM event %s: a UD id has none such", e.Event)
	case (e.Event == CMConnectRequest) != (e.Listener != CMNone) || (e.Listener != CMNone && e.Listener >= MaxCMIDs) || e.Listener == e.ID:
		return CMEvent{}, protoErrorf("UD CM event %s with listener %#x for id %d", e.Event, e.Listener, e.ID)
	case e.Status < -4095 || e.Status > 0xff || (e.Status > 0 && e.Event != CMUnreachable):
		return CMEvent{}, protoErrorf("UD CM event %s with status %d", e.Event, e.Status)
	case u.QPN > 0xffffff || u.AH.FlowLabel > 0xfffff || u.AH.SL > 15 || g > 1:
		return CMEvent{}, protoErrorf("UD CM event %s with QPN %#x, flow label %#x, SL %d, is_global %d", e.Event, u.QPN, u.AH.FlowLabel, u.AH.SL, g)
	case e.Event != CMEstablished && (*u != CMUD{}):
		return CMEvent{}, protoErrorf("UD CM event %s with a peer's QP or address handle: only ESTABLISHED carries them", e.Event)
	}
	if err := parseCMTail(b[cmUDEventSize-cmTailSize:], &e, "UD CM event"); err != nil {
		return CMEvent{}, err
	}
	e.QPN = u.QPN
	return e, nil
}

// parseCMPush decodes one message of the CM's event socket: an RC id's
// event or a UD id's.
func parseCMPush(msg []byte) (CMEvent, error) {
	if h, err := ParseHeader(msg); err == nil && h.Op() == OpCMUDEvent {
		return ParseCMUDEvent(msg)
	}
	return ParseCMEvent(msg)
}

// SIDRStatus names a SIDR_REP's status, as an UNREACHABLE event of a UD
// id carries it.
func SIDRStatus(s int32) string {
	switch s {
	case 1:
		return "no listener on that port (SIDR status 1, service ID not supported)"
	case 2:
		return "rejected by the peer's application (SIDR status 2)"
	case 3:
		return "no QP for the request (SIDR status 3)"
	case 4:
		return "redirected (SIDR status 4), which rdma_cm does not follow"
	case 5:
		return "the peer does not support this SIDR version (SIDR status 5)"
	}
	return fmt.Sprintf("status %d", s)
}
