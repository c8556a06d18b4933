package verbs

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cmEvents collects the CM's events for the test.
type cmEvents chan CMEvent

// wait returns the next event of id, failing the test if another of id's
// comes first or none in a generous deadline (a hang, not a bound);
// events of other ids are kept for later waits.
func (c cmEvents) wait(t *testing.T, id uint32, want CMEventType, other *[]CMEvent) CMEvent {
	t.Helper()
	for i, e := range *other {
		if e.ID == id {
			*other = append((*other)[:i], (*other)[i+1:]...)
			if e.Event != want {
				t.Fatalf("id %d: %s (status %d), want %s", id, e.Event, e.Status, want)
			}
			return e
		}
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-c:
			if e.ID != id {
				*other = append(*other, e)
				continue
			}
			if e.Event != want {
				t.Fatalf("id %d: %s (status %d), want %s", id, e.Event, e.Status, want)
			}
			return e
		case <-deadline:
			t.Fatalf("id %d: no %s in 30 s", id, want)
		}
	}
}

// TestCMOnDevice connects two device QPs through the device's own CM
// (the kernel's rdma_cm, through librdmacm in the helper; rxe loops back):
// a listener on the port's IPv4 address, a connect naming QP a by number,
// the request with its private data and the peer's QPN, the passive QP
// moved with rdma_init_qp_attr's attributes and accepted, the reply, the
// active QP moved and the RTU (established on both ends); the PSNs each
// side sends from are the ones the other expects. SENDs move bytes both
// ways; a disconnect reaches both ends. A request rejected with private
// data arrives as REJECTED (consumer reason 28) with it, and one to a port
// nobody listens on is rejected too.
func TestCMOnDevice(t *testing.T) {
	d, dev := openTestDevice(t)
	if _, _, err := d.CMListen(CMAddr{}, 1); !errors.Is(err, ErrDevice) {
		t.Errorf("CMListen before CMOpen: %v, want ErrDevice (ENOTCONN)", err)
	}
	events := make(cmEvents, 64)
	if err := d.CMOpen(func(e CMEvent) { events <- e }); err != nil {
		t.Fatalf("CMOpen: %v", err)
	}
	port, err := d.QueryPort()
	if err != nil {
		t.Fatal(err)
	}
	gid, ok := roceGID(port)
	if !ok || !bytes.Equal(gid.GID[:12], []byte{10: 0xff, 11: 0xff}) {
		t.Fatalf("%s has no IPv4 RoCE v2 GID: %+v", dev, port.GIDs)
	}
	addr := gid.GID
	t.Logf("address %d.%d.%d.%d", addr[12], addr[13], addr[14], addr[15])

	const size = 64 << 10
	ra, rb := newRegion(t, d, size), newRegion(t, d, size)
	cqa, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	cqb, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	qcap := QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	newQP := func(cq CQ) QP {
		q, err := d.CreateQP(cq, cq, qcap)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.ModifyQP(q, QPAttr{State: QPStateInit, Access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead}); err != nil {
			t.Fatal(err)
		}
		return q
	}
	qa, qb := newQP(cqa), newQP(cqb)
	move := func(id uint32, q QP, states ...uint32) QPAttr {
		t.Helper()
		var a QPAttr
		for _, s := range states {
			var err error
			if a, err = d.CMQPAttr(id, s); err != nil {
				t.Fatalf("CMQPAttr(%d, state %d): %v", id, s, err)
			}
			if err := d.ModifyQP(q, a); err != nil {
				t.Fatalf("ModifyQP with the CM's attributes for state %d (%+v): %v", s, a, err)
			}
		}
		return a
	}

	lid, lport, err := d.CMListen(CMAddr{Addr: addr}, 4)
	if err != nil {
		t.Fatalf("CMListen: %v", err)
	}
	var other []CMEvent
	aid, err := d.CMConnect(CMConnectParam{TimeoutMs: 5000, QPN: qa.QPN, Dst: CMAddr{addr, lport},
		ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7, PrivateData: []byte("vrdma req")})
	if err != nil {
		t.Fatalf("CMConnect: %v", err)
	}
	events.wait(t, aid, CMAddrResolved, &other)
	events.wait(t, aid, CMRouteResolved, &other)
	var req CMEvent
	for req.Event != CMConnectRequest {
		select {
		case req = <-events:
		case <-time.After(30 * time.Second):
			t.Fatal("no CONNECT_REQUEST in 30 s")
		}
	}
	if req.Listener != lid || req.QPN != qa.QPN || !bytes.HasPrefix(req.PrivateData, []byte("vrdma req")) ||
		req.Peer.Addr != addr || req.Local.Addr != addr || req.Local.Port != lport {
		t.Errorf("request %+v: want listener %d, QPN %d, private data \"vrdma req\", addresses %x port %d", req, lid, qa.QPN, addr, lport)
	}
	rtrB := move(req.ID, qb, QPStateRTR)
	rtsB := move(req.ID, qb, QPStateRTS)
	if rtrB.DestQPN != qa.QPN || rtrB.DGID != addr {
		t.Errorf("the passive side's RTR attributes %+v: want QPN %d, GID %x", rtrB, qa.QPN, addr)
	}
	if err := d.PostRecv(qb, []RecvWR{{WRID: 1, SGEs: rb.sge(0, 4096)}}); err != nil {
		t.Fatal(err)
	}
	if err := d.CMAccept(req.ID, qb.QPN, 1, 1, 7, []byte("vrdma rep")); err != nil {
		t.Fatalf("CMAccept: %v", err)
	}
	rep := events.wait(t, aid, CMConnectResponse, &other)
	if rep.QPN != qb.QPN || !bytes.HasPrefix(rep.PrivateData, []byte("vrdma rep")) {
		t.Errorf("reply %+v: want QPN %d, private data \"vrdma rep\"", rep, qb.QPN)
	}
	rtrA := move(aid, qa, QPStateRTR)
	rtsA := move(aid, qa, QPStateRTS)
	if rtrA.DestQPN != qb.QPN || rtsA.SQPSN != rtrB.RQPSN || rtsB.SQPSN != rtrA.RQPSN {
		t.Errorf("PSNs: a sends from %#x, b expects %#x; b sends from %#x, a expects %#x (a's RTR to QPN %d)",
			rtsA.SQPSN, rtrB.RQPSN, rtsB.SQPSN, rtrA.RQPSN, rtrA.DestQPN)
	}
	if err := d.CMEstablish(aid); err != nil {
		t.Fatalf("CMEstablish: %v", err)
	}
	events.wait(t, req.ID, CMEstablished, &other)

	sent0 := hwCounter(t, dev, "sent_pkts")
	copy(ra.mem, bytes.Repeat([]byte("through the device's CM "), 100))
	if err := d.PostSend(qa, []SendWR{{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGEs: ra.sge(0, 2400)}}); err != nil {
		t.Fatal(err)
	}
	wantWC(t, "SEND a→b", pollOne(t, d, cqa), WCSuccess, WCSend, 2, -1)
	wantWC(t, "RECV b", pollOne(t, d, cqb), WCSuccess, WCRecv, 1, 2400)
	if !bytes.Equal(rb.mem[:2400], ra.mem[:2400]) {
		t.Errorf("b received %q..., want %q...", rb.mem[:24], ra.mem[:24])
	}
	if err := d.PostRecv(qa, []RecvWR{{WRID: 3, SGEs: ra.sge(8192, 4096)}}); err != nil {
		t.Fatal(err)
	}
	copy(rb.mem[8192:], "and back")
	if err := d.PostSend(qb, []SendWR{{WRID: 4, Opcode: WRSend, Flags: SendSignaled, SGEs: rb.sge(8192, 8)}}); err != nil {
		t.Fatal(err)
	}
	wantWC(t, "SEND b→a", pollOne(t, d, cqb), WCSuccess, WCSend, 4, -1)
	wantWC(t, "RECV a", pollOne(t, d, cqa), WCSuccess, WCRecv, 3, 8)
	if string(ra.mem[8192:8200]) != "and back" {
		t.Errorf("a received %q, want \"and back\"", ra.mem[8192:8200])
	}
	// sysfs serves hw_counters from a cache that lives 10 ms of the
	// kernel's time (more in a guest slowed by its host): read again until
	// it is renewed, for a generous while (a hang guard, not a bound).
	sent := hwCounter(t, dev, "sent_pkts") - sent0
	for end := time.Now().Add(10 * time.Second); sent < 4 && time.Now().Before(end); sent = hwCounter(t, dev, "sent_pkts") - sent0 {
		time.Sleep(20 * time.Millisecond)
	}
	if sent < 4 {
		t.Errorf("%s sent %d packets for 2400 + 8 bytes at MTU 1024, want at least 4", dev, sent)
	}

	if err := d.CMDisconnect(aid); err != nil {
		t.Fatalf("CMDisconnect: %v", err)
	}
	events.wait(t, req.ID, CMDisconnected, &other)
	if err := d.CMDisconnect(req.ID); err != nil {
		t.Errorf("CMDisconnect (the passive side's answer): %v", err)
	}
	events.wait(t, aid, CMDisconnected, &other)
	for _, id := range []uint32{aid, req.ID} {
		if err := d.CMDestroy(id); err != nil {
			t.Errorf("CMDestroy(%d): %v", id, err)
		}
	}

	// A request the listener rejects, with private data.
	qc := newQP(cqa)
	cid, err := d.CMConnect(CMConnectParam{TimeoutMs: 5000, QPN: qc.QPN, Dst: CMAddr{addr, lport}, RetryCount: 7, RNRRetryCount: 7})
	if err != nil {
		t.Fatalf("CMConnect: %v", err)
	}
	req = CMEvent{}
	for req.Event != CMConnectRequest {
		select {
		case req = <-events:
			if req.ID == cid {
				other = append(other, req)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no second CONNECT_REQUEST in 30 s")
		}
	}
	if err := d.CMReject(req.ID, []byte("not you")); err != nil {
		t.Fatalf("CMReject: %v", err)
	}
	other = dropEvents(other, cid, CMAddrResolved, CMRouteResolved)
	rej := events.wait(t, cid, CMRejected, &other)
	if rej.Status != 28 || !bytes.HasPrefix(rej.PrivateData, []byte("not you")) {
		t.Errorf("rejected: %+v, want reason 28 (consumer) and private data \"not you\"", rej)
	}
	d.CMDestroy(req.ID)
	d.CMDestroy(cid)

	// A port nobody listens on.
	nid, err := d.CMConnect(CMConnectParam{TimeoutMs: 5000, QPN: qc.QPN, Dst: CMAddr{addr, lport + 1}, RetryCount: 7, RNRRetryCount: 7})
	if err != nil {
		t.Fatalf("CMConnect: %v", err)
	}
	var last CMEvent
	for last.ID != nid || last.Event == CMAddrResolved || last.Event == CMRouteResolved {
		select {
		case last = <-events:
		case <-time.After(60 * time.Second):
			t.Fatal("no answer to a request to a port nobody listens on in 60 s")
		}
	}
	if last.Event != CMRejected && last.Event != CMUnreachable {
		t.Errorf("a request to port %d, where nobody listens: %s (status %d), want REJECTED", lport+1, last.Event, last.Status)
	}
	t.Logf("no listener: %s, status %d", last.Event, last.Status)
	if err := d.CMDestroy(lid); err != nil {
		t.Errorf("CMDestroy(listener): %v", err)
	}
	if err := d.CMAccept(lid, qa.QPN, 1, 1, 7, nil); err == nil || !errors.Is(err, ErrDevice) {
		t.Errorf("CMAccept on a destroyed id: %v, want ErrDevice", err)
	} else if e := (*Error)(nil); errors.As(err, &e) && e.Errno != int32(unix.ENOENT) {
		t.Errorf("CMAccept on a destroyed id: errno %d, want ENOENT", e.Errno)
	}
}

// dropEvents removes id's events of the given types from evs.
func dropEvents(evs []CMEvent, id uint32, types ...CMEventType) []CMEvent {
	out := evs[:0]
next:
	for _, e := range evs {
		for _, ty := range types {
			if e.ID == id && e.Event == ty {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}
