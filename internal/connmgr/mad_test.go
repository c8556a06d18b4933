package connmgr_test

// The manager over CM MADs: what unreliable datagrams need (retransmission
// up to Max CM Retries, MRA for a slow listener, stale comm IDs after
// TIMEWAIT) and what it does with MADs from a peer it does not know — a
// Linux rdma_cm, or anyone on the network.

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

// linuxGID is a peer that is no vrdma host: the test speaks for it.
var linuxGID = [16]byte{0xfe, 0x80, 8: 0x50, 0x54, 0, 0xff, 0xfe, 0xc0, 2, 50}

// reqMAD builds a REQ as Linux rdma_cm sends it from linuxGID to dst,
// port, with mod applied.
func reqMAD(t testing.TB, dst [16]byte, port uint16, consumer []byte, mod func(*ibcm.REQ)) []byte {
	t.Helper()
	pd, err := ibcm.AppendIPHeader(nil, ibcm.IPHeader{SrcPort: 0x8afa, Src: netip.AddrFrom16(linuxGID).Unmap(), Dst: netip.AddrFrom16(dst).Unmap()})
	if err != nil {
		t.Fatal(err)
	}
	r := ibcm.REQ{LocalCommID: 0x572a4dcd, ServiceID: ibcm.ServiceID(ibcm.PortSpaceTCP, port), LocalCAGUID: 0x505400fffe479101,
		LocalQPN: 0x1f, ResponderResources: 1, InitiatorDepth: 1, RemoteCMResponseTimeout: 20, StartingPSN: 0x5059d4,
		LocalCMResponseTimeout: 20, RetryCount: 7, PKey: 0xffff, PathMTU: 3, RNRRetryCount: 7, MaxCMRetries: 15,
		Primary:     ibcm.Path{LocalLID: 0xffff, RemoteLID: 0xffff, LocalGID: linuxGID, RemoteGID: dst, FlowLabel: 0x0f04c, HopLimit: 64, LocalACKTimeout: 0x13},
		PrivateData: append(pd, consumer...)}
	if mod != nil {
		mod(&r)
	}
	b, err := r.Append(ibcm.AppendHeader(nil, ibcm.CMHeader(ibcm.AttrREQ, 0x2cd4d2a57)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lastREJ waits for the count-th REJ the network carried, but for those
// the test sent from linuxGID, and returns it.
func lastREJ(t testing.TB, n *gsiNet, count int) ibcm.REJ {
	t.Helper()
	rejs := func() []sentMAD {
		return slices.DeleteFunc(n.mads(ibcm.AttrREJ), func(s sentMAD) bool { return s.src == linuxGID })
	}
	waitFor(t, "a REJ", func() bool { return len(rejs()) >= count })
	m := rejs()[count-1]
	_, d, err := ibcm.ParseMAD(m.mad[:])
	if err != nil {
		t.Fatal(err)
	}
	rej, err := ibcm.ParseREJ(d)
	if err != nil {
		t.Fatal(err)
	}
	return rej
}

// A REQ from a peer the manager does not know: served when it is what
// rdma_cm sends, rejected with the IBTA reason when it cannot be.
func TestCMMADRequestFromAPeer(t *testing.T) {
	n := newGSINet()
	linux := n.end(linuxGID)
	m, h := madManager(t, n, nil)
	s := listenSession(t, m, h, 7000, 0)
	dst := h.gid()
	xrc := func(r *ibcm.REQ) {
		// What Linux's CM sends for an XRC_INI id of RDMA_PS_IB.
		r.ServiceID = ibcm.ServiceID(ibcm.PortSpaceIB, 7000)
		r.TransportType, r.ExtTransportType = 3, 1
		r.ResponderResources, r.InitiatorDepth, r.RetryCount, r.RNRRetryCount = 0, 4, 0, 0
	}
	tests := []struct {
		name   string
		port   uint16
		mod    func(*ibcm.REQ)
		reason uint16 // 0: served
		qpType uint8  // served: the request's QP type
		rd     uint8  // served: the READs and atomics its target serves
	}{
		{"rdma_cm's", 7000, nil, 0, cm.QPTypeRC, 1},
		{"XRC in RDMA_PS_IB", 7000, xrc, 0, cm.QPTypeXRCSend, 4},
		{"RC in RDMA_PS_IB", 7000, func(r *ibcm.REQ) { r.ServiceID = ibcm.ServiceID(ibcm.PortSpaceIB, 7000) }, 0, cm.QPTypeRC, 1},
		{"nobody listens", 7001, nil, ibcm.RejectInvalidServiceID, 0, 0},
		{"the UDP port space", 7000, func(r *ibcm.REQ) { r.ServiceID = ibcm.ServiceID(ibcm.PortSpaceUDP, 7000) }, ibcm.RejectInvalidServiceID, 0, 0},
		{"no IP service ID", 7000, func(r *ibcm.REQ) { r.ServiceID = 0x1234 }, ibcm.RejectInvalidServiceID, 0, 0},
		{"no IP CM header", 7000, func(r *ibcm.REQ) { r.PrivateData = []byte{0, 0x50} }, ibcm.RejectInvalidServiceID, 0, 0},
		{"transport type 3, extended type 2", 7000, func(r *ibcm.REQ) { r.TransportType, r.ExtTransportType = 3, 2 }, ibcm.RejectInvalidTransportType, 0, 0},
		{"transport type 2 (RD)", 7000, func(r *ibcm.REQ) { r.TransportType = 2 }, ibcm.RejectInvalidTransportType, 0, 0},
		{"a source GID not the packet's", 7000, func(r *ibcm.REQ) { r.Primary.LocalGID[15]++ }, ibcm.RejectInvalidGID, 0, 0},
		{"path MTU code 7", 7000, func(r *ibcm.REQ) { r.PathMTU = 7 }, ibcm.RejectInvalidMTU, 0, 0},
		{"an address that is not this host's", 7000, func(r *ibcm.REQ) { r.Primary.RemoteGID[15]++ }, ibcm.RejectInvalidGID, 0, 0},
		{"from this host's own address", 7000, func(r *ibcm.REQ) { r.Primary.LocalGID = dst }, ibcm.RejectInvalidGID, 0, 0},
	}
	rejs := 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mad := reqMAD(t, dst, tt.port, []byte("hi"), func(r *ibcm.REQ) {
				r.LocalCommID += uint32(i)
				if tt.mod != nil {
					tt.mod(r)
				}
			})
			linux.send(t, n, dst, mad)
			if tt.reason == 0 {
				ev := s.event()
				if ev.Type != proto.CMEventRequest || ev.QPN != 0x1f || ev.PSN != 0x5059d4 || ev.MTU != 3 || ev.RemotePort != 0x8afa ||
					ev.LocalPort != 7000 || !bytes.Equal(ev.GID, linuxGID[:]) || len(ev.PrivateData) != 56 || padded(ev.PrivateData) != "hi" ||
					ev.QPType != tt.qpType || ev.RdAtomic != tt.rd {
					t.Fatalf("request %+v: want QP type %d, rd_atomic %d", ev, tt.qpType, tt.rd)
				}
				return
			}
			rejs++
			rej := lastREJ(t, n, rejs)
			if rej.Reason != tt.reason || rej.RemoteCommID != 0x572a4dcd+uint32(i) || rej.MessageRejected != ibcm.MsgREQ {
				t.Fatalf("REJ %+v, want reason %d for comm ID %#x", rej, tt.reason, 0x572a4dcd+uint32(i))
			}
		})
	}
	if st := m.Stats(); st.WrongSource != 2 {
		t.Fatalf("stats %+v: want the requests with another source and with this host's counted", st)
	}
}

// send puts a MAD from e's GID on the network, to dst.
func (e *gsiEnd) send(t testing.TB, n *gsiNet, dst [16]byte, mad []byte) {
	t.Helper()
	if err := e.SendGSI(e.gid, dst, 1, mad); err != nil {
		t.Fatal(err)
	}
}

// MADs that are no CM Send are counted and dropped, unanswered.
func TestCMMADMalformed(t *testing.T) {
	n := newGSINet()
	linux := n.end(linuxGID)
	m, h := madManager(t, n, nil)
	dst := h.gid()
	good := reqMAD(t, dst, 7000, nil, nil)
	tests := []struct {
		name string
		mod  func([]byte)
	}{
		{"base version 2", func(b []byte) { b[0] = 2 }},
		{"the SA's class", func(b []byte) { b[1] = 0x03 }},
		{"class version 1", func(b []byte) { b[2] = 1 }},
		{"a GetResp", func(b []byte) { b[3] = ibcm.MethodGetResp }},
		{"a REJ with ARI length 100", func(b []byte) {
			copy(b[16:18], []byte{0, byte(ibcm.AttrREJ)})
			b[ibcm.HeaderSize+9] = 100 << 1
		}},
	}
	for i, tt := range tests {
		mad := bytes.Clone(good)
		tt.mod(mad)
		linux.send(t, n, dst, mad)
		waitFor(t, tt.name+" counted", func() bool { return m.Stats().MADsMalformed == uint64(i+1) })
	}
	for _, rej := range n.mads(ibcm.AttrREJ) {
		if rej.src == dst {
			t.Fatalf("a REJ for a malformed MAD: %x", rej.mad)
		}
	}
}

// A requester whose REQs all go unanswered sends it again Max CM Retries
// times, then gives up: a timeout event, and a REJ (timeout).
func TestCMMADRequesterGivesUp(t *testing.T) {
	n := newGSINet()
	n.setRule(func(a ibcm.AttrID, _ int) fate {
		if a == ibcm.AttrREQ {
			return drop
		}
		return deliver
	})
	_, hb := madManager(t, n, nil)
	ma, ha := madManager(t, n, nil)
	s := connectSessionTo(t, ma, ha, hb.gid(), 7000, 60000)
	if ev := s.event(); ev.Type != proto.CMEventTimeout {
		t.Fatalf("event %+v, want timeout", ev)
	}
	if got := len(n.mads(ibcm.AttrREQ)); got != 5 {
		t.Fatalf("%d REQs sent, want 1 and 4 retries", got)
	}
	if rej := lastREJ(t, n, 1); rej.Reason != ibcm.RejectTimeout {
		t.Fatalf("REJ %+v, want timeout", rej)
	}
	if st := ma.Stats(); st.Retransmits != 4 {
		t.Fatalf("stats %+v, want 4 retransmissions", st)
	}
}

// connectSessionTo is a new session with an RC QP that dials addr, port,
// with timeoutMs.
func connectSessionTo(t testing.TB, m *connmgr.Manager, h *testHost, addr [16]byte, port uint16, timeoutMs uint32) *session {
	t.Helper()
	s := newSession(t, h.adapter)
	qp, _ := s.newQP(abi.QPTypeRC)
	if err := s.do(func() error {
		_, err := m.Connect(s, proto.CMConnectReq{ID: 5, QP: qp, PSN: 1, Addr: addr[:], Port: port, TimeoutMs: timeoutMs})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// A listener slower than the requester's response timeout: the repeated
// REQ gets an MRA, which holds the requester's retransmissions; the
// listener's session hears of the request once, and its answer connects.
func TestCMMADSlowListenerMRA(t *testing.T) {
	n := newGSINet()
	mb, hb := madManager(t, n, nil)
	ma, ha := madManager(t, n, nil)
	sb := listenSession(t, mb, hb, 7000, 0)
	sa := connectSessionTo(t, ma, ha, hb.gid(), 7000, 60000)
	ev := sb.event()
	if ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v", ev)
	}
	waitFor(t, "an MRA", func() bool { return ma.Stats().MRAsReceived > 0 })
	if st := mb.Stats(); st.MRAsSent == 0 || st.Duplicates == 0 {
		t.Fatalf("listener's stats %+v: want a duplicate REQ answered with an MRA", st)
	}
	qb, qpB := sb.newQP(abi.QPTypeRC)
	connect(t, qpB, ev, 2, false)
	if err := sb.do(func() error { return mb.Accept(sb, proto.CMAcceptReq{ID: ev.ID, QP: qb, PSN: 2}) }); err != nil {
		t.Fatal(err)
	}
	if ev := sa.event(); ev.Type != proto.CMEventReply {
		t.Fatalf("event %+v, want the reply", ev)
	}
	select {
	case ev := <-sb.events:
		t.Fatalf("the listener got %+v: one request, one event", ev)
	default:
	}
}

// After a connection ends, a late copy of its REQ is stale: REJ (stale
// connection), counted, no request event.
func TestCMMADStaleRequest(t *testing.T) {
	n := newGSINet()
	linux := n.end(linuxGID)
	m, h := madManager(t, n, nil)
	s := listenSession(t, m, h, 7000, 0)
	dst := h.gid()
	req := reqMAD(t, dst, 7000, nil, nil)
	linux.send(t, n, dst, req)
	ev := s.event()
	q, qp := s.newQP(abi.QPTypeRC)
	connect(t, qp, ev, 2, false)
	if err := s.do(func() error { return m.Accept(s, proto.CMAcceptReq{ID: ev.ID, QP: q, PSN: 2}) }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the REP", func() bool { return len(n.mads(ibcm.AttrREP)) > 0 })
	_, d, _ := ibcm.ParseMAD(n.mads(ibcm.AttrREP)[0].mad[:])
	rep, _ := ibcm.ParseREP(d)
	for _, msg := range []interface{ Append([]byte) ([]byte, error) }{
		&ibcm.RTU{LocalCommID: 0x572a4dcd, RemoteCommID: rep.LocalCommID},
		&ibcm.DREQ{LocalCommID: 0x572a4dcd, RemoteCommID: rep.LocalCommID, RemoteQPN: rep.LocalQPN},
	} {
		attr := ibcm.AttrRTU
		if _, ok := msg.(*ibcm.DREQ); ok {
			attr = ibcm.AttrDREQ
		}
		b, err := msg.Append(ibcm.AppendHeader(nil, ibcm.CMHeader(attr, 0x2cd4d2a57)))
		if err != nil {
			t.Fatal(err)
		}
		linux.send(t, n, dst, b)
	}
	if ev := s.event(); ev.Type != proto.CMEventEstablished {
		t.Fatalf("event %+v", ev)
	}
	if ev := s.event(); ev.Type != proto.CMEventDisconnected {
		t.Fatalf("event %+v", ev)
	}
	waitFor(t, "the DREP", func() bool { return len(n.mads(ibcm.AttrDREP)) == 1 })
	linux.send(t, n, dst, req)
	if rej := lastREJ(t, n, 1); rej.Reason != ibcm.RejectStaleConnection {
		t.Fatalf("REJ %+v, want stale connection", rej)
	}
	if st := m.Stats(); st.StaleRequests != 1 {
		t.Fatalf("stats %+v", st)
	}
	select {
	case ev := <-s.events:
		t.Fatalf("event %+v for a stale request", ev)
	default:
	}
}

// FuzzCMMAD feeds arbitrary MADs to a manager with a listener: it must
// not crash, and must still answer a REQ after.
func FuzzCMMAD(f *testing.F) {
	n := newGSINet()
	linux := n.end(linuxGID)
	m, h := madManager(f, n, nil)
	listenSession(f, m, h, 7000, 0).discardEvents()
	dst := h.gid()
	f.Add(reqMAD(f, dst, 7000, []byte("x"), nil))
	for _, a := range []ibcm.AttrID{ibcm.AttrREP, ibcm.AttrRTU, ibcm.AttrREJ, ibcm.AttrMRA, ibcm.AttrDREQ, ibcm.AttrDREP, ibcm.AttrSIDRREQ} {
		b := ibcm.AppendHeader(nil, ibcm.CMHeader(a, 1))
		f.Add(append(b, make([]byte, ibcm.DataSize)...))
	}
	probe := reqMAD(f, dst, 9, nil, func(r *ibcm.REQ) { r.LocalCommID = 0xdead })
	f.Fuzz(func(t *testing.T, b []byte) {
		var mad [ibcm.MADSize]byte
		copy(mad[:], b)
		before := m.Stats().MADsIn
		linux.send(t, n, dst, mad[:])
		linux.send(t, n, dst, probe)
		waitFor(t, "both MADs run", func() bool { return m.Stats().MADsIn >= before+2 })
	})
}

// A flood of REQs from one address takes at most MaxInProgressPerSource
// of the listener's backlog: the next are refused (no resources) and
// counted, and requests from another address still get through.
func TestCMMADFloodFromOneSource(t *testing.T) {
	n := newGSINet()
	linux := n.end(linuxGID)
	other := linuxGID
	other[15]++
	second := n.end(other)
	m, h := madManager(t, n, func(c *connmgr.Config) { c.MaxInProgressPerSource = 2 })
	s := listenSession(t, m, h, 7000, 16)
	dst := h.gid()
	for i := range 3 {
		linux.send(t, n, dst, reqMAD(t, dst, 7000, nil, func(r *ibcm.REQ) { r.LocalCommID = 100 + uint32(i) }))
	}
	for range 2 {
		if ev := s.event(); ev.Type != proto.CMEventRequest {
			t.Fatalf("event %+v", ev)
		}
	}
	if rej := lastREJ(t, n, 1); rej.Reason != ibcm.RejectNoResources || rej.RemoteCommID != 102 {
		t.Fatalf("REJ %+v, want no resources for the third request", rej)
	}
	second.send(t, n, dst, reqMAD(t, dst, 7000, nil, func(r *ibcm.REQ) { r.LocalCommID, r.Primary.LocalGID = 200, other }))
	if ev := s.event(); ev.Type != proto.CMEventRequest || !bytes.Equal(ev.GID, other[:]) {
		t.Fatalf("event %+v, want the other address's request", ev)
	}
	if st := m.Stats(); st.InProgressLimit != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// establish connects a new session of ma's to a new listening session of
// mb's on port, through the API, and returns both sessions and the
// listener's id for the connection.
func establish(t *testing.T, ma *connmgr.Manager, ha *testHost, mb *connmgr.Manager, hb *testHost, port uint16) (sa, sb *session, idB uint32) {
	t.Helper()
	sb = listenSession(t, mb, hb, port, 0)
	sa = newSession(t, ha.adapter)
	qa, qpA := sa.newQP(abi.QPTypeRC)
	dst := hb.gid()
	if err := sa.do(func() error {
		_, err := ma.Connect(sa, proto.CMConnectReq{ID: 5, QP: qa, PSN: 1, Addr: dst[:], Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ev := sb.event()
	qb, qpB := sb.newQP(abi.QPTypeRC)
	connect(t, qpB, ev, 2, false)
	if err := sb.do(func() error { return mb.Accept(sb, proto.CMAcceptReq{ID: ev.ID, QP: qb, PSN: 2}) }); err != nil {
		t.Fatal(err)
	}
	connect(t, qpA, sa.event(), 1, true)
	if err := sa.do(func() error { return ma.Accept(sa, proto.CMAcceptReq{ID: 5}) }); err != nil {
		t.Fatal(err)
	}
	if ev := sb.event(); ev.Type != proto.CMEventEstablished {
		t.Fatalf("event %+v", ev)
	}
	return sa, sb, ev.ID
}

// A session that ends with a connection established: its DREQ, the first
// of which is lost, goes again after the session is gone, until the peer
// answers; the peer hears of the disconnection.
func TestCMMADSessionEndsDREQLost(t *testing.T) {
	n := newGSINet()
	mb, hb := madManager(t, n, nil)
	ma, ha := madManager(t, n, nil)
	sa, sb, _ := establish(t, ma, ha, mb, hb, 7000)
	n.setRule(func(a ibcm.AttrID, n int) fate {
		if a == ibcm.AttrDREQ && n == 0 {
			return drop
		}
		return deliver
	})
	ma.CloseSession(sa)
	if ev := sb.event(); ev.Type != proto.CMEventDisconnected {
		t.Fatalf("event %+v, want disconnected", ev)
	}
	waitFor(t, "the DREP", func() bool { return len(n.mads(ibcm.AttrDREP)) > 0 })
	if got := len(n.mads(ibcm.AttrDREQ)); got < 2 {
		t.Fatalf("%d DREQs sent, want the lost one sent again", got)
	}
	if h := sa.holds(connmgr.Connections); h != 0 {
		t.Fatalf("the ended session still holds %d connections", h)
	}
}

// A listener whose port carries a smaller MTU than the REQ's rejects it
// (invalid path MTU) naming its own in the ARI, as a REP cannot; the
// requester asks again with it, and both QPs get the smaller MTU.
func TestCMMADSmallerMTU(t *testing.T) {
	n := newGSINet()
	mb, hb := madManager(t, n, nil)
	ma, ha := madManager(t, n, nil)
	hb.adapter.ActiveMTU = abi.MTU1024
	sb := listenSession(t, mb, hb, 7000, 0)
	sa := connectSessionTo(t, ma, ha, hb.gid(), 7000, 60000)
	ev := sb.event()
	if ev.Type != proto.CMEventRequest || ev.MTU != uint8(abi.MTU1024) {
		t.Fatalf("request %+v, want MTU 1024", ev)
	}
	qb, qpB := sb.newQP(abi.QPTypeRC)
	connect(t, qpB, ev, 2, false)
	if err := sb.do(func() error { return mb.Accept(sb, proto.CMAcceptReq{ID: ev.ID, QP: qb, PSN: 2}) }); err != nil {
		t.Fatal(err)
	}
	if ev := sa.event(); ev.Type != proto.CMEventReply || ev.MTU != uint8(abi.MTU1024) {
		t.Fatalf("reply %+v, want MTU 1024", ev)
	}
	rej := lastREJ(t, n, 1)
	if rej.Reason != ibcm.RejectInvalidMTU || rej.ARILength != 1 || rej.ARI[0] != uint8(abi.MTU1024) {
		t.Fatalf("REJ %+v", rej)
	}
	if st := ma.Stats(); st.MTURetries != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// The REQ of a connection to a port of smaller MTU arrives twice (it was
// sent again, or the network doubled it): both copies are rejected naming
// the smaller MTU, and the second REJ, which comes after the requester
// asked again with it, is a late answer to the first request, not a
// refusal of the second: the connection is set up.
func TestCMMADSmallerMTUREQTwice(t *testing.T) {
	n := newGSINet()
	n.setRule(func(a ibcm.AttrID, k int) fate {
		if a == ibcm.AttrREQ && k == 0 {
			return duplicate
		}
		return deliver
	})
	mb, hb := madManager(t, n, nil)
	ma, ha := madManager(t, n, nil)
	hb.adapter.ActiveMTU = abi.MTU1024
	sb := listenSession(t, mb, hb, 7000, 0)
	sa := connectSessionTo(t, ma, ha, hb.gid(), 7000, 60000)
	ev := sb.event()
	if ev.Type != proto.CMEventRequest || ev.MTU != uint8(abi.MTU1024) {
		t.Fatalf("request %+v, want MTU 1024", ev)
	}
	qb, qpB := sb.newQP(abi.QPTypeRC)
	connect(t, qpB, ev, 2, false)
	if err := sb.do(func() error { return mb.Accept(sb, proto.CMAcceptReq{ID: ev.ID, QP: qb, PSN: 2}) }); err != nil {
		t.Fatal(err)
	}
	if ev := sa.event(); ev.Type != proto.CMEventReply || ev.MTU != uint8(abi.MTU1024) {
		t.Fatalf("reply %+v, want MTU 1024", ev)
	}
	if rej := lastREJ(t, n, 2); rej.Reason != ibcm.RejectInvalidMTU {
		t.Fatalf("second REJ %+v, want the first request's copy rejected for its MTU", rej)
	}
	if st := ma.Stats(); st.MTURetries != 1 {
		t.Fatalf("stats %+v, want one MTU retry", st)
	}
}

// A REQ from outside the switch (an address the host's membership test
// does not know): dropped unanswered and counted, unless the listener's
// adapter is a native endpoint, which serves it as any other.
func TestCMMADOutsider(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run(map[bool]string{false: "member instance", true: "native endpoint"}[native], func(t *testing.T) {
			n := newGSINet()
			linux := n.end(linuxGID)
			m, h := madManager(t, n, nil)
			h.adapter.NativeEndpoint = native // before any MAD: the receiver reads it after the send below
			h.SetMembers(func([16]byte) bool { return false })
			s := listenSession(t, m, h, 7000, 0)
			linux.send(t, n, h.gid(), reqMAD(t, h.gid(), 7000, []byte("hi"), nil))
			if native {
				if ev := s.event(); ev.Type != proto.CMEventRequest {
					t.Fatalf("event %+v, want the request", ev)
				}
				if st := m.Stats(); st.Outsiders != 0 {
					t.Fatalf("stats %+v: a request to a native endpoint counted as refused", st)
				}
				return
			}
			waitFor(t, "the request counted as from outside", func() bool { return m.Stats().Outsiders == 1 })
			if len(s.events) != 0 {
				t.Fatalf("the listener got %+v", <-s.events)
			}
			for _, attr := range []ibcm.AttrID{ibcm.AttrREJ, ibcm.AttrREP, ibcm.AttrMRA} {
				if got := n.mads(attr); len(got) != 0 {
					t.Fatalf("the manager answered an outsider's request: %d MADs of attribute %#x", len(got), attr)
				}
			}
		})
	}
}
