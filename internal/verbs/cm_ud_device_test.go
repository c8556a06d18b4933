package verbs

import (
	"bytes"
	"testing"
	"time"
)

// TestCMUDOnDevice resolves a UD QP through the device's own CM (SIDR:
// the kernel's rdma_cm of the UDP port space, through librdmacm in the
// helper; rxe loops back): a UD listener on the port's IPv4 address, a
// dial (SIDR_REQ) with private data, the request with it (a UD id's: no
// peer QP yet), the SIDR_REP naming UD QP b, and on the dialling side
// ESTABLISHED with b's QPN, rdma_cm's Q_Key and the address handle's
// attributes the kernel resolved (GRH to the port's own GID). An AH made
// from those attributes carries a datagram from a to b with that QPN and
// Q_Key. A request rejected by the listener is UNREACHABLE with the SIDR
// status "rejected" (2), and one to a port nobody listens on is
// UNREACHABLE too.
func TestCMUDOnDevice(t *testing.T) {
	d, dev := openTestDevice(t)
	events := make(cmEvents, 64)
	if err := d.CMOpen(func(e CMEvent) { events <- e }); err != nil {
		t.Fatalf("CMOpen: %v", err)
	}
	gid := testGID(t, d)
	addr := gid.GID
	if !bytes.Equal(addr[:12], []byte{10: 0xff, 11: 0xff}) {
		t.Fatalf("%s has no IPv4 RoCE v2 GID: %+v", dev, gid)
	}
	ra, rb := newRegion(t, d, 64<<10), newRegion(t, d, 64<<10)
	cqa, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	cqb, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	qcap := QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	var qps [2]QP
	for i, cq := range []CQ{cqa, cqb} {
		if qps[i], err = d.CreateUDQP(cq, cq, qcap); err != nil {
			t.Fatal(err)
		}
		for _, st := range []uint32{QPStateInit, QPStateRTR, QPStateRTS} {
			if err := d.ModifyUDQP(qps[i], st, RDMAUDPQKey, 0); err != nil {
				t.Fatalf("ModifyUDQP to %d: %v", st, err)
			}
		}
	}
	qa, qb := qps[0], qps[1]

	lid, lport, err := d.CMUDListen(CMAddr{Addr: addr}, 4)
	if err != nil {
		t.Fatalf("CMUDListen: %v", err)
	}
	var other []CMEvent
	dial := func(port uint16, pdata string) uint32 {
		t.Helper()
		id, err := d.CMUDConnect(CMConnectParam{TimeoutMs: 5000, QPN: qa.QPN, Dst: CMAddr{addr, port}, PrivateData: []byte(pdata)})
		if err != nil {
			t.Fatalf("CMUDConnect: %v", err)
		}
		return id
	}
	request := func() CMEvent {
		t.Helper()
		for i, e := range other {
			if e.Event == CMConnectRequest {
				other = append(other[:i], other[i+1:]...)
				return e
			}
		}
		for {
			select {
			case e := <-events:
				if e.Event == CMConnectRequest {
					return e
				}
				other = append(other, e)
			case <-time.After(30 * time.Second):
				t.Fatal("no CONNECT_REQUEST in 30 s")
			}
		}
	}
	aid := dial(lport, "vrdma sidr req")
	req := request()
	if req.UD == nil || req.Listener != lid || !bytes.HasPrefix(req.PrivateData, []byte("vrdma sidr req")) ||
		req.Peer.Addr != addr || req.Local.Port != lport {
		t.Errorf("request %+v (UD %+v): want a UD one on listener %d with private data \"vrdma sidr req\" from %x", req, req.UD, lid, addr)
	}
	if err := d.CMUDAccept(req.ID, qb.QPN, []byte("vrdma sidr rep")); err != nil {
		t.Fatalf("CMUDAccept: %v", err)
	}
	other = dropEvents(other, aid, CMAddrResolved, CMRouteResolved)
	var est CMEvent
	for est.ID != aid || est.Event == CMAddrResolved || est.Event == CMRouteResolved {
		est = events.wait(t, aid, CMEstablished, &other)
	}
	u := est.UD
	if u == nil || u.QPN != qb.QPN || u.QKey != RDMAUDPQKey || !u.AH.IsGlobal || u.AH.DGID != addr ||
		!bytes.HasPrefix(est.PrivateData, []byte("vrdma sidr rep")) {
		t.Fatalf("established %+v (UD %+v): want b's QPN %#x, Q_Key %#x, a GRH to %x, private data \"vrdma sidr rep\"", est, u, qb.QPN, uint32(RDMAUDPQKey), addr)
	}
	t.Logf("SIDR: QPN %#x, Q_Key %#x, AH %+v, port %d", u.QPN, u.QKey, u.AH, u.Port)
	d.CMDestroy(aid)
	d.CMDestroy(req.ID)

	ah, err := d.CreateAH(u.AH)
	if err != nil {
		t.Fatalf("CreateAH with the SIDR reply's attributes %+v: %v", u.AH, err)
	}
	if err := d.PostRecv(qb, []RecvWR{{WRID: 1, SGEs: rb.sge(0, GRHSize+256)}}); err != nil {
		t.Fatal(err)
	}
	copy(ra.mem, "a datagram to the QP the SIDR reply named")
	if err := d.PostSendUD(qa, []UDSendWR{{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGEs: ra.sge(0, 41), AH: ah.Handle, RemoteQPN: u.QPN, RemoteQKey: u.QKey}}); err != nil {
		t.Fatalf("PostSendUD: %v", err)
	}
	wantWC(t, "UD send", pollOne(t, d, cqa), WCSuccess, WCSend, 2, -1)
	wc := pollOne(t, d, cqb)
	wantWC(t, "UD receive", wc, WCSuccess, WCRecv, 1, GRHSize+41)
	if !bytes.Equal(rb.mem[GRHSize:GRHSize+41], ra.mem[:41]) || wc.SrcQP != qa.QPN {
		t.Errorf("b received %q from QP %#x, want %q from %#x", rb.mem[GRHSize:GRHSize+41], wc.SrcQP, ra.mem[:41], qa.QPN)
	}

	// Rejected by the listener.
	cid := dial(lport, "")
	req = request()
	if err := d.CMReject(req.ID, []byte("not you")); err != nil {
		t.Fatalf("CMReject: %v", err)
	}
	other = dropEvents(other, cid, CMAddrResolved, CMRouteResolved)
	var last CMEvent
	for last.ID != cid || last.Event == CMAddrResolved || last.Event == CMRouteResolved {
		last = events.wait(t, cid, CMUnreachable, &other)
	}
	if last.Status != 2 {
		t.Errorf("rejected: %+v, want UNREACHABLE with SIDR status 2 (rejected)", last)
	}
	d.CMDestroy(req.ID)
	d.CMDestroy(cid)

	// A port nobody listens on.
	nid := dial(lport+1, "")
	last = CMEvent{}
	for last.ID != nid || last.Event == CMAddrResolved || last.Event == CMRouteResolved {
		select {
		case last = <-events:
		case <-time.After(60 * time.Second):
			t.Fatal("no answer to a SIDR request to a port nobody listens on in 60 s")
		}
	}
	if last.Event != CMUnreachable {
		t.Errorf("a SIDR request to port %d, where nobody listens: %s (status %d), want UNREACHABLE", lport+1, last.Event, last.Status)
	}
	t.Logf("no listener: %s, status %d (%s)", last.Event, last.Status, SIDRStatus(last.Status))
	if err := d.CMUDAccept(lid, qb.QPN, nil); err == nil {
		t.Errorf("CMUDAccept on a listener: no error")
	}
	if err := d.CMDestroy(lid); err != nil {
		t.Errorf("CMDestroy(listener): %v", err)
	}
}
