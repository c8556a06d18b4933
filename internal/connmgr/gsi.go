package connmgr

// The connection manager's transport between hosts: IBTA CM MADs on QP1
// of the host's links (RoCEv2, or inside the TCP channel's IBTA packets:
// the host routes them as it routes any packet between two GIDs), as Linux
// rdma_cm speaks them. One peer, gsi, stands for every remote CM; a
// connection is known to it by the peer's GID and comm ID.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

// GSI is QP1 of the host's links, which CM MADs leave from and arrive on:
// *engine.Host.
type GSI interface {
	// SendGSI sends a MAD from QP1 at sgid to QP dqp at dgid.
	SendGSI(sgid, dgid [16]byte, dqp uint32, mad []byte) error
	// SetGSIHandler sets the function every MAD to QP1 goes to (nil:
	// none). It runs on a link's receive goroutine and must not block.
	SetGSIHandler(f func(*engine.GSIDatagram))
	// GSIRoute returns nil if a link carries MADs from sgid to dgid, else
	// why not.
	GSIRoute(sgid, dgid [16]byte) error
}

// madQueue bounds the MADs waiting to be run, and those waiting to be
// sent: past it they are dropped and counted (the sender of a lost one
// sends it again on its timeout).
const madQueue = 1024

var errUnknownMessage = errors.New("connection manager: no MAD for this message")

// inMAD is a MAD that arrived, copied off the link's buffer.
type inMAD struct {
	src, dst [16]byte
	srcQP    uint32
	mad      [ibcm.MADSize]byte
}

// outMAD is a MAD to send.
type outMAD struct {
	src, dst [16]byte
	mad      [ibcm.MADSize]byte
}

// madStats count the MAD transport's work.
type madStats struct {
	in, dropped, malformed, unsupported, sendErrors, outDropped                                    atomic.Uint64
	retransmits, duplicates, mraSent, mraReceived, stale, backlogFull, inProgressLimit, mtuRetries atomic.Uint64
}

// madTransport is QP1 to the manager: what arrives is decoded and run,
// what leaves is encoded and queued for the sender. One peer, gsiPeer,
// stands for every remote CM.
type madTransport struct {
	*core
	gsi     GSI
	gsiPeer *peer // nil without a GSI
	madIn   chan inMAD
	madOut  chan outMAD
	madStop chan struct{}
}

// startGSI sets the host's GSI handler and starts the goroutines that run
// what arrives and send what leaves.
func (m *madTransport) startGSI(g GSI) {
	m.gsi = g
	m.gsiPeer = newPeer(m.core, "QP1")
	m.gsiPeer.gsi = true
	m.madIn = make(chan inMAD, madQueue)
	m.madOut = make(chan outMAD, madQueue)
	m.madStop = make(chan struct{})
	m.wg.Add(2)
	go m.mad.madReceiver()
	go m.mad.madSender()
	g.SetGSIHandler(m.onGSI)
}

// stopGSI stops taking MADs and ends the goroutines once what is queued to
// send is sent.
func (m *madTransport) stopGSI() {
	if m.gsi == nil {
		return
	}
	m.gsi.SetGSIHandler(nil)
	close(m.madStop)
}

// onGSI is the host's GSI handler: it copies the MAD and queues it,
// never waiting.
func (m *madTransport) onGSI(d *engine.GSIDatagram) {
	if len(d.MAD) != ibcm.MADSize {
		m.mads.malformed.Add(1)
		return
	}
	in := inMAD{src: d.Src, dst: d.Dst, srcQP: d.SrcQP}
	copy(in.mad[:], d.MAD)
	select {
	case m.madIn <- in:
	default:
		m.mads.dropped.Add(1)
	}
}

func (m *madTransport) madReceiver() {
	defer m.wg.Done()
	for {
		select {
		case in := <-m.madIn:
			m.mad.onMAD(&in)
		case <-m.madStop:
			return
		}
	}
}

func (m *madTransport) madSender() {
	defer m.wg.Done()
	for {
		select {
		case o := <-m.madOut:
			m.mad.sendMAD(&o)
		case <-m.madStop:
			for {
				select {
				case o := <-m.madOut:
					m.mad.sendMAD(&o)
				default:
					return
				}
			}
		}
	}
}

func (m *madTransport) sendMAD(o *outMAD) {
	err := m.gsi.SendGSI(o.src, o.dst, engine.GSIQPN, o.mad[:])
	if err == nil {
		return
	}
	m.mads.sendErrors.Add(1)
	if ibcm.AttrID(binary.BigEndian.Uint16(o.mad[16:18])) != ibcm.AttrREQ {
		return
	}
	// A REQ that cannot leave: its connection fails now rather than on
	// its timeout.
	id := binary.BigEndian.Uint32(o.mad[ibcm.HeaderSize:])
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.conns[id]
	if m.closed || c == nil || !c.active || c.state != reqSent || c.peer != m.gsiPeer {
		return
	}
	m.book.remove(c)
	ev := c.event(proto.CMEventUnreachable)
	ev.Text = clip(fmt.Sprintf("cannot send the request to %s: %v", gidString(c.remoteGID), err))
	c.tell(ev)
}

// queueMAD encodes msg with v and queues it for the sender; m.mu is held.
func (m *madTransport) queueMAD(v *via, msg cm.Message) {
	var o outMAD
	b, err := encodeMAD(v, msg, o.mad[:0])
	if err != nil || len(b) != ibcm.MADSize {
		m.log.Error("connection manager: a message of this daemon does not encode as a MAD", "msg", fmt.Sprintf("%T", msg), "err", err)
		return
	}
	o.src, o.dst = v.src, v.dst
	select {
	case m.madOut <- o:
	default:
		m.mads.outDropped.Add(1)
	}
}

// onMAD runs a MAD that arrived: decoded into the manager's message and
// what came with it, or counted and dropped; a REQ the manager cannot
// serve is rejected here.
func (m *madTransport) onMAD(in *inMAD) {
	m.mads.in.Add(1)
	h, d, err := ibcm.ParseMAD(in.mad[:])
	if err != nil || h.ClassVersion != ibcm.ClassVersion || h.Method != ibcm.MethodSend {
		m.mads.malformed.Add(1)
		return
	}
	v := &via{src: in.src, dst: in.dst, tid: h.TID}
	var msg cm.Message
	switch h.Attr {
	case ibcm.AttrREQ:
		r, err := ibcm.ParseREQ(d)
		if err != nil {
			m.mads.malformed.Add(1)
			return
		}
		if m.mad.refuseOutsider(in.src, r.ServiceID) {
			return
		}
		req, reason := m.mad.reqOfMAD(in, &r, v)
		if req == nil {
			if reason == cm.RejectInvalidGID {
				m.adm.wrongSource.Add(1)
			}
			m.mu.Lock()
			m.mad.queueMAD(v.reply(0), &cm.REJ{RemoteID: r.LocalCommID, Reason: reason})
			m.mu.Unlock()
			return
		}
		msg = req
	case ibcm.AttrREP:
		r, err := ibcm.ParseREP(d)
		if err != nil {
			m.mads.malformed.Add(1)
			return
		}
		v.guid, v.qpn, v.eecn = r.LocalCAGUID, r.LocalQPN, r.LocalEECN
		msg = &cm.REP{LocalID: r.LocalCommID, RemoteID: r.RemoteCommID, ResponderResources: r.ResponderResources,
			InitiatorDepth: r.InitiatorDepth, QPN: r.LocalQPN, PSN: r.StartingPSN, GID: in.src, PrivateData: bytes.Clone(r.PrivateData)}
	case ibcm.AttrRTU:
		r, err := ibcm.ParseRTU(d)
		if err != nil {
			m.mads.malformed.Add(1)
			return
		}
		msg = &cm.RTU{LocalID: r.LocalCommID, RemoteID: r.RemoteCommID, PrivateData: bytes.Clone(r.PrivateData)}
	case ibcm.AttrREJ:
		r, err := ibcm.ParseREJ(d)
		if err != nil {
			m.mads.malformed.Add(1)
			return
		}
		msg = &cm.REJ{LocalID: r.LocalCommID, RemoteID: r.RemoteCommID, Reason: cm.Reason(r.Reason), PrivateData: bytes.Clone(r.PrivateData)}
		v.ari = bytes.Clone(r.ARI[:r.ARILength])
	case ibcm.AttrMRA:
		r, err := ibcm.ParseMRA(d)
		if err != nil {
			m.mads.malformed.Add(1)
			return
		}
		m.mads.mraReceived.Add(1)
		msg = &mra{LocalID: r.LocalCommID, RemoteID: r.RemoteCommID, what: r.MessageMRAed, serviceTimeout: r.ServiceTimeout}
	case ibcm.AttrDREQ:
		r, err := ibcm.ParseDREQ(d)
		if err != nil {
			m.mads.malformed.Add(1)
			return
		}
		msg = &cm.DREQ{LocalID: r.LocalCommID, RemoteID: r.RemoteCommID, PrivateData: bytes.Clone(r.PrivateData)}
	case ibcm.AttrDREP:
		r, err := ibcm.ParseDREP(d)
		if err != nil {
			m.mads.malformed.Add(1)
			return
		}
		msg = &cm.DREP{LocalID: r.LocalCommID, RemoteID: r.RemoteCommID, PrivateData: bytes.Clone(r.PrivateData)}
	case ibcm.AttrSIDRREQ:
		r, err := ibcm.ParseSIDRREQ(d)
		if err != nil {
			m.mads.malformed.Add(1)
			return
		}
		if m.mad.refuseOutsider(in.src, r.ServiceID) {
			return
		}
		ps, port, ok := ibcm.ParseServiceID(r.ServiceID)
		ip, consumer, err := ibcm.ParseIPHeader(r.PrivateData)
		if !ok || ps != ibcm.PortSpaceUDP || err != nil || m.host.IsLocalGID(in.src) {
			m.mu.Lock()
			m.mad.queueMAD(v.reply(0), &sidrRep{RequestID: r.RequestID, Port: port, Status: ibcm.SIDRNoService})
			m.mu.Unlock()
			return
		}
		// A SIDR_REQ names no GIDs: the packet's are the addresses.
		msg = &sidrReq{RequestID: r.RequestID, SrcPort: ip.SrcPort, DstPort: port, SrcGID: in.src, DstGID: in.dst,
			PrivateData: bytes.Clone(consumer)}
	case ibcm.AttrSIDRREP:
		r, err := ibcm.ParseSIDRREP(d)
		if err != nil {
			m.mads.malformed.Add(1)
			return
		}
		_, port, _ := ibcm.ParseServiceID(r.ServiceID)
		msg = &sidrRep{RequestID: r.RequestID, Port: port, Status: r.Status, QPN: r.QPN, QKey: r.QKey, PrivateData: bytes.Clone(r.PrivateData)}
	default: // LAP/APR, ClassPortInfo: not served
		m.mads.unsupported.Add(1)
		return
	}
	m.msgs.handle(m.gsiPeer, v, msg)
}

// reqOfMAD turns a REQ MAD into the manager's REQ, or says why it is
// rejected: a service ID outside rdma_cm's TCP and IB port spaces (the
// daemon's ports are one space: a listener's port serves both), a
// transport other than RC, UC or XRC, no IP CM header, a path MTU out of
// range, or a primary path whose source GID is not the packet's (over
// RoCEv2 nothing else tells who sent it).
func (m *madTransport) reqOfMAD(in *inMAD, r *ibcm.REQ, v *via) (*cm.REQ, cm.Reason) {
	ps, port, ok := ibcm.ParseServiceID(r.ServiceID)
	if !ok || ps != ibcm.PortSpaceTCP && ps != ibcm.PortSpaceIB {
		return nil, cm.RejectInvalidServiceID
	}
	var qpType uint8
	switch {
	case r.TransportType == 0 && r.ExtTransportType == 0:
		qpType = cm.QPTypeRC
	case r.TransportType == 1:
		qpType = cm.QPTypeUC
	case r.TransportType == 3 && r.ExtTransportType == 1: // XRC (IBTA A14; Linux's cm_req_get_qp_type)
		qpType = cm.QPTypeXRCSend
	default:
		return nil, cm.RejectInvalidTransportType
	}
	if r.Primary.LocalGID != in.src || m.host.IsLocalGID(in.src) {
		// Over RoCEv2 nothing else says who sent it; and a request from
		// an adapter of this host comes through the in-process peer,
		// never as a MAD.
		return nil, cm.RejectInvalidGID
	}
	if r.PathMTU < 1 || r.PathMTU > 5 {
		return nil, cm.RejectInvalidMTU
	}
	ip, consumer, err := ibcm.ParseIPHeader(r.PrivateData)
	if err != nil {
		return nil, cm.RejectInvalidServiceID
	}
	v.guid, v.qpn = r.LocalCAGUID, r.LocalQPN
	v.respTimeout, v.localTimeout, v.maxRetries = r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout, r.MaxCMRetries
	return &cm.REQ{LocalID: r.LocalCommID, SrcPort: ip.SrcPort, DstPort: port, QPType: qpType, MTU: r.PathMTU,
		ResponderResources: r.ResponderResources, InitiatorDepth: r.InitiatorDepth, QPN: r.LocalQPN, PSN: r.StartingPSN,
		SrcGID: r.Primary.LocalGID, DstGID: r.Primary.RemoteGID, PrivateData: bytes.Clone(consumer)}, 0
}

// refuseOutsider reports whether a request from src for serviceID is
// dropped, unanswered, and counts it: src is outside the switch
// (Host.IsOutsider) and no listener whose adapter accepts native endpoints
// has the port. No answer, not even a REJ: an outsider learns nothing of
// the ports that listen.
func (m *madTransport) refuseOutsider(src [16]byte, serviceID uint64) bool {
	if !m.host.IsOutsider(src) {
		return false
	}
	_, port, _ := ibcm.ParseServiceID(serviceID)
	m.mu.Lock()
	l := m.listeners[port]
	native := l != nil && l.s.Adapter().NativeEndpoint
	m.mu.Unlock()
	if native {
		return false
	}
	m.adm.outsiders.Add(1)
	m.refused("connection manager: dropped a request from outside the switch (an address no member host publishes); `vrdma vm create --native-endpoints` takes them", "source", gidString(src), "port", port)
	return true
}
