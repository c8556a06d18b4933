package connmgr_test

// What a tenant makes the manager hold is charged to it: its listeners
// and its connections (sent and received) through Session.Charge, given
// back when they end; a request to a listener whose session is not
// reading its events is refused rather than queued.

import (
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

// A listener is charged from Listen to CancelListen or the session's end;
// the session's limit refuses one more, and a port refused as taken
// charges nothing.
func TestCMListenersCharged(t *testing.T) {
	m, h := newManager(t, nil)
	s := newSession(t, h.adapter)
	other := listenSession(t, m, h, 9, 0)
	s.limitTo(connmgr.Listeners, 2)
	listen := func(id uint32, port uint16) error {
		return s.do(func() error {
			_, err := m.Listen(s, proto.CMListenReq{ID: id, Port: port})
			return err
		})
	}
	if err := listen(1, 9); proto.CodeOf(err) != proto.CodeBusy || s.holds(connmgr.Listeners) != 0 {
		t.Fatalf("a taken port: %v, %d listeners charged; want CodeBusy and none", err, s.holds(connmgr.Listeners))
	}
	for id := uint32(1); id <= 2; id++ {
		if err := listen(id, uint16(100+id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := listen(3, 103); proto.CodeOf(err) != proto.CodeLimit || !strings.Contains(err.Error(), "2 listeners of 2 allowed") {
		t.Fatalf("a third listener: %v, want the session's limit", err)
	}
	if err := s.do(func() error { return m.CancelListen(s, 1) }); err != nil {
		t.Fatal(err)
	}
	if n := s.holds(connmgr.Listeners); n != 1 {
		t.Fatalf("%d listeners charged after one was cancelled, want 1", n)
	}
	if err := listen(3, 103); err != nil {
		t.Fatalf("a listener in the room the cancel made: %v", err)
	}
	m.CloseSession(s)
	m.CloseSession(other)
	if a, b := s.holds(connmgr.Listeners), other.holds(connmgr.Listeners); a != 0 || b != 0 {
		t.Fatalf("sessions ended: %d and %d listeners still charged", a, b)
	}
}

// A request received is charged to the listening session until it ends
// (here, the requester gives up); at the session's limit the next one is
// rejected with no resources, and counted.
func TestCMRequestsCharged(t *testing.T) {
	n := newGSINet()
	linux := n.end(linuxGID)
	m, h := madManager(t, n, nil)
	s := listenSession(t, m, h, 7000, 8)
	s.limitTo(connmgr.Connections, 1)
	dst := h.gid()
	send := func(id uint32) {
		linux.send(t, n, dst, reqMAD(t, dst, 7000, nil, func(r *ibcm.REQ) { r.LocalCommID = id }))
	}
	send(1)
	if ev := s.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v", ev)
	}
	send(2)
	if rej := lastREJ(t, n, 1); rej.RemoteCommID != 2 || rej.Reason != ibcm.RejectNoResources {
		t.Fatalf("REJ %+v, want no resources for request 2", rej)
	}
	if st := m.Stats(); st.OverLimit != 1 {
		t.Fatalf("stats %+v, want one request over the limit", st)
	}
	linux.send(t, n, dst, madOf(t, ibcm.AttrREJ, &ibcm.REJ{LocalCommID: 1, Reason: ibcm.RejectTimeout}))
	if ev := s.event(); ev.Type != proto.CMEventRejected {
		t.Fatalf("event %+v", ev)
	}
	if n := s.holds(connmgr.Connections); n != 0 {
		t.Fatalf("%d connections charged after the only request ended", n)
	}
	send(3)
	if ev := s.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v: a request in the room the first one left", ev)
	}
	m.CloseSession(s)
	if n := s.holds(connmgr.Connections); n != 0 {
		t.Fatalf("the session ended: %d connections still charged", n)
	}
}

// A dial is charged before anything is sent; at the limit it fails with
// the session's error and nothing goes out.
func TestCMConnectCharged(t *testing.T) {
	m, h := newManager(t, nil)
	l := listenSession(t, m, h, 7, 8)
	s := newSession(t, h.adapter)
	s.limitTo(connmgr.Connections, 1)
	qp1, _ := s.newQP(abi.QPTypeRC)
	qp2, _ := s.newQP(abi.QPTypeRC)
	gid := h.gid()
	dial := func(id, qp uint32) error {
		return s.do(func() error {
			_, err := m.Connect(s, proto.CMConnectReq{ID: id, QP: qp, PSN: 1, Addr: gid[:], Port: 7})
			return err
		})
	}
	if err := dial(5, qp1); err != nil {
		t.Fatal(err)
	}
	if ev := l.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v", ev)
	}
	if err := dial(6, qp2); proto.CodeOf(err) != proto.CodeLimit || !strings.Contains(err.Error(), "1 connections of 1 allowed") {
		t.Fatalf("a second dial: %v, want the session's limit", err)
	}
	m.CloseSession(s)
	if ev := l.event(); ev.Type != proto.CMEventRejected || !strings.Contains(ev.Text, "the requesting process exited") {
		t.Fatalf("event %+v, want the request withdrawn", ev)
	}
	if n := s.holds(connmgr.Connections); n != 0 {
		t.Fatalf("the session ended: %d connections still charged", n)
	}
	select {
	case ev := <-l.events:
		t.Fatalf("the refused dial reached the listener: %+v", ev)
	default:
	}
}

// A request to a listener whose session has stopped reading its events
// is rejected at once (no resources: receiver not ready), counted, and
// not queued; once it reads again, requests are served.
func TestCMLaggingListener(t *testing.T) {
	n := newGSINet()
	linux := n.end(linuxGID)
	m, h := madManager(t, n, nil)
	s := listenSession(t, m, h, 7000, 8)
	dst := h.gid()
	s.lagging.Store(true)
	linux.send(t, n, dst, reqMAD(t, dst, 7000, nil, func(r *ibcm.REQ) { r.LocalCommID = 1 }))
	if rej := lastREJ(t, n, 1); rej.RemoteCommID != 1 || rej.Reason != ibcm.RejectNoResources {
		t.Fatalf("REJ %+v, want no resources", rej)
	}
	if st := m.Stats(); st.Lagging != 1 {
		t.Fatalf("stats %+v, want one request refused for a lagging listener", st)
	}
	if n := s.holds(connmgr.Connections); n != 0 || len(s.events) != 0 {
		t.Fatalf("a refused request left %d connections charged and %d events", n, len(s.events))
	}
	s.lagging.Store(false)
	linux.send(t, n, dst, reqMAD(t, dst, 7000, nil, func(r *ibcm.REQ) { r.LocalCommID = 2 }))
	if ev := s.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v", ev)
	}
}
