package connmgr

// The manager's messages (package cm's) as IBTA CM MADs (package ibcm), the way Linux
// rdma_cm builds them: what a MAD carries beyond a message (its
// transaction, the CA GUID, the QPN a DREQ names, the CM timeouts) is the
// connection's, in a via.

import (
	"net/netip"

	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/ibcm"
)

// via is what a MAD carries besides its message: where it goes from and
// to, its transaction, and the sender's CA GUID and CM timing.
type via struct {
	src, dst [16]byte // GIDs: this side's and the peer's when sending; the packet's when received
	tid      uint64
	guid     uint64 // the sender's CA GUID
	qpn      uint32 // a DREQ's remote QPN; a received REQ's or REP's local QPN
	eecn     uint32 // a received REP's Local EE Context Number: an XRC target's QPN
	xrc      bool   // the connection is XRC: a REP sent names the target's QPN as its Local EE Context Number
	// respTimeout is a REQ's remote CM response timeout (how long the
	// requester waits for an answer) and localTimeout its local one (how
	// long the requester takes to answer a REP); maxRetries its Max CM
	// Retries. 5-bit exponents of 4.096 µs.
	respTimeout, localTimeout, maxRetries uint8
	rejected                              uint8  // a REJ's "message rejected": ibcm.MsgREQ, MsgREP, MsgOther
	ari                                   []byte // a REJ's additional rejection information
}

// reply is the via of an answer to a MAD that came with v.
func (v *via) reply(guid uint64) *via {
	return &via{src: v.dst, dst: v.src, tid: v.tid, guid: guid}
}

// The CM timing a vrdma requester puts in its REQ (Config can lower them).
const (
	// defaultResponseTimeout is 4.096 µs·2^18 ≈ 1.07 s: rdma_cm puts 20
	// (≈ 4.3 s); any value is the requester's to choose (a responder that
	// needs longer sends an MRA, as Linux's rdma_cm does at once for a
	// listener in user space).
	defaultResponseTimeout = 18
	defaultPacketLife      = 14 // ≈ 67 ms, counted twice in a retransmission interval
	defaultMaxCMRetries    = 15 // rdma_cm's
	mraServiceTimeout      = 24 // ≈ 68.7 s: what an MRA of this side asks for (rdma_cm's too)
	pathHopLimit           = 64 // the primary path fields rdma_cm fills over RoCE
	pathLocalACKTimeout    = 0x13
	repTargetACKDelay      = 0x0f
)

// encodeMAD builds msg's MAD, with v, into out.
func encodeMAD(v *via, msg cm.Message, out []byte) ([]byte, error) {
	var err error
	b := out[:0]
	switch x := msg.(type) {
	case *cm.REQ:
		b = ibcm.AppendHeader(b, ibcm.CMHeader(ibcm.AttrREQ, v.tid))
		var pd [ibcm.REQPrivateSize]byte
		src, dst := netip.AddrFrom16(x.SrcGID).Unmap(), netip.AddrFrom16(x.DstGID).Unmap()
		h, herr := ibcm.AppendIPHeader(pd[:0], ibcm.IPHeader{SrcPort: x.SrcPort, Src: src, Dst: dst})
		if herr != nil {
			return nil, herr
		}
		n := copy(pd[len(h):], x.PrivateData)
		path := ibcm.Path{LocalLID: 0xffff, RemoteLID: 0xffff, LocalGID: x.SrcGID, RemoteGID: x.DstGID,
			HopLimit: pathHopLimit, LocalACKTimeout: pathLocalACKTimeout}
		r := ibcm.REQ{LocalCommID: x.LocalID, ServiceID: ibcm.ServiceID(ibcm.PortSpaceTCP, x.DstPort), LocalCAGUID: v.guid,
			LocalQPN: x.QPN, ResponderResources: x.ResponderResources, InitiatorDepth: x.InitiatorDepth,
			RemoteCMResponseTimeout: v.respTimeout, StartingPSN: x.PSN,
			LocalCMResponseTimeout: v.localTimeout, RetryCount: 7, PKey: 0xffff, PathMTU: x.MTU, RNRRetryCount: 7,
			MaxCMRetries: v.maxRetries, Primary: path, PrivateData: pd[:len(h)+n]}
		switch x.QPType {
		case cm.QPTypeUC:
			r.TransportType = 1
		case cm.QPTypeXRCSend:
			// As Linux's rdma_cm: XRC is RDMA_PS_IB's (its kernel gives
			// other types only to RDMA_PS_IB ids), transport service
			// type 3 with extended type 1, and an initiator's REQ leaves
			// the responder resources, retry counts and SRQ unset.
			r.ServiceID = ibcm.ServiceID(ibcm.PortSpaceIB, x.DstPort)
			r.TransportType, r.ExtTransportType = 3, 1
			r.ResponderResources, r.RetryCount, r.RNRRetryCount = 0, 0, 0
		}
		b, err = r.Append(b)
	case *cm.REP:
		b = ibcm.AppendHeader(b, ibcm.CMHeader(ibcm.AttrREP, v.tid))
		r := ibcm.REP{LocalCommID: x.LocalID, RemoteCommID: x.RemoteID, LocalQPN: x.QPN, StartingPSN: x.PSN,
			ResponderResources: x.ResponderResources, InitiatorDepth: x.InitiatorDepth, TargetACKDelay: repTargetACKDelay,
			RNRRetryCount: 7, LocalCAGUID: v.guid, PrivateData: x.PrivateData}
		if v.xrc {
			// An XRC target's REP (Linux's cm_format_rep): its QPN as the
			// Local EE Context Number, SRQ set, no initiator depth.
			r.LocalQPN, r.LocalEECN, r.SRQ, r.InitiatorDepth = 0, x.QPN, true, 0
		}
		b, err = r.Append(b)
	case *cm.RTU:
		b = ibcm.AppendHeader(b, ibcm.CMHeader(ibcm.AttrRTU, v.tid))
		r := ibcm.RTU{LocalCommID: x.LocalID, RemoteCommID: x.RemoteID, PrivateData: x.PrivateData}
		b, err = r.Append(b)
	case *cm.REJ:
		b = ibcm.AppendHeader(b, ibcm.CMHeader(ibcm.AttrREJ, v.tid))
		r := ibcm.REJ{LocalCommID: x.LocalID, RemoteCommID: x.RemoteID, MessageRejected: v.rejected, Reason: uint16(x.Reason),
			ARILength: uint8(min(len(v.ari), ibcm.REJARISize)), PrivateData: x.PrivateData}
		copy(r.ARI[:], v.ari)
		b, err = r.Append(b)
	case *cm.DREQ:
		b = ibcm.AppendHeader(b, ibcm.CMHeader(ibcm.AttrDREQ, v.tid))
		r := ibcm.DREQ{LocalCommID: x.LocalID, RemoteCommID: x.RemoteID, RemoteQPN: v.qpn, PrivateData: x.PrivateData}
		b, err = r.Append(b)
	case *cm.DREP:
		b = ibcm.AppendHeader(b, ibcm.CMHeader(ibcm.AttrDREP, v.tid))
		r := ibcm.DREP{LocalCommID: x.LocalID, RemoteCommID: x.RemoteID, PrivateData: x.PrivateData}
		b, err = r.Append(b)
	case *mra:
		b = ibcm.AppendHeader(b, ibcm.CMHeader(ibcm.AttrMRA, v.tid))
		r := ibcm.MRA{LocalCommID: x.LocalID, RemoteCommID: x.RemoteID, MessageMRAed: x.what, ServiceTimeout: x.serviceTimeout}
		b, err = r.Append(b)
	default:
		return encodeSIDR(v, msg, out)
	}
	return b, err
}

// mra is an MRA as a message of the manager's: only ever sent and
// received as a MAD.
type mra struct {
	LocalID, RemoteID uint32
	what              uint8 // ibcm.MsgREQ, MsgREP
	serviceTimeout    uint8
}

func (m *mra) Type() cm.Type               { return 0 }
func (m *mra) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }
func (m *mra) String() string              { return "MRA" }

var _ cm.Message = (*mra)(nil)

// sidrReq is a SIDR_REQ (UD service resolution, rdma_cm's UDP port
// space): which QP serves port DstPort.
type sidrReq struct {
	RequestID        uint32
	SrcPort, DstPort uint16
	SrcGID, DstGID   [16]byte
	PrivateData      []byte
}

// sidrRep answers a sidrReq: the listener's UD QP and Q_Key, or a status
// (ibcm.SIDRNoService ...) saying why not.
type sidrRep struct {
	RequestID   uint32
	Port        uint16 // the service's (rdma_cm echoes the service ID)
	Status      uint8
	QPN, QKey   uint32
	PrivateData []byte
}

func (m *sidrReq) Type() cm.Type               { return 0 }
func (m *sidrReq) IDs() (local, remote uint32) { return m.RequestID, 0 }
func (m *sidrRep) Type() cm.Type               { return 0 }
func (m *sidrRep) IDs() (local, remote uint32) { return 0, m.RequestID }

// The private data rdma_cm's UDP port space leaves the consumer: a
// SIDR_REQ's after the IP CM header, and a SIDR_REP's.
const (
	sidrReqPrivate = ibcm.SIDRREQPrivateSize - ibcm.IPHeaderSize
	sidrRepPrivate = ibcm.SIDRREPPrivateSize
)

// encodeSIDR builds a SIDR message's MAD into out.
func encodeSIDR(v *via, msg cm.Message, out []byte) ([]byte, error) {
	b := out[:0]
	switch x := msg.(type) {
	case *sidrReq:
		b = ibcm.AppendHeader(b, ibcm.CMHeader(ibcm.AttrSIDRREQ, v.tid))
		var pd [ibcm.SIDRREQPrivateSize]byte
		src, dst := netip.AddrFrom16(x.SrcGID).Unmap(), netip.AddrFrom16(x.DstGID).Unmap()
		h, err := ibcm.AppendIPHeader(pd[:0], ibcm.IPHeader{SrcPort: x.SrcPort, Src: src, Dst: dst})
		if err != nil {
			return nil, err
		}
		n := copy(pd[len(h):], x.PrivateData)
		r := ibcm.SIDRREQ{RequestID: x.RequestID, PKey: 0xffff, ServiceID: ibcm.ServiceID(ibcm.PortSpaceUDP, x.DstPort), PrivateData: pd[:len(h)+n]}
		return r.Append(b)
	case *sidrRep:
		b = ibcm.AppendHeader(b, ibcm.CMHeader(ibcm.AttrSIDRREP, v.tid))
		r := ibcm.SIDRREP{RequestID: x.RequestID, Status: x.Status, QPN: x.QPN, ServiceID: ibcm.ServiceID(ibcm.PortSpaceUDP, x.Port),
			QKey: x.QKey, PrivateData: x.PrivateData}
		return r.Append(b)
	}
	return nil, errUnknownMessage
}
