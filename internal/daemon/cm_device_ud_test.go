package daemon

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/verbs"
)

func (f *fakeCMDevice) CMUDListen(a verbs.CMAddr, backlog uint32) (uint32, uint16, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.nextHID
	f.nextHID++
	f.calls = append(f.calls, fmt.Sprintf("udlisten %d", a.Port))
	return id, a.Port, nil
}
func (f *fakeCMDevice) CMUDConnect(p verbs.CMConnectParam) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.nextHID
	f.nextHID++
	f.connect = p
	f.calls = append(f.calls, fmt.Sprintf("udconnect %d", id))
	return id, nil
}
func (f *fakeCMDevice) CMUDAccept(id, qpn uint32, pd []byte) error {
	f.rec("udaccept %d qpn %#x %q", id, qpn, pd)
	return nil
}

// TestDeviceCMUDPassive: a session's UD listener on a verbs uplink is an id
// of the device's UDP port space; a SIDR request reaches the session as the
// software CM's UD request (QPType UD, the peer's address as its GID, the
// index of the port's GID it came to, the private data); its accept is the
// device's SIDR_REP naming its device UD QP, after which nothing stays (the
// id destroyed, the charge given back). A reject answers with the SIDR
// status "rejected" (and at most 136 bytes); a SIDR request to an RC
// listener is refused by the device.
func TestDeviceCMUDPassive(t *testing.T) {
	m, f := newTestDeviceCM(t)
	c := newFakeCMClient(4)
	if port, err := m.Listen(c, proto.CMListenReq{ID: 7, Port: 7174, UD: true}, false); err != nil || port != 7174 {
		t.Fatalf("Listen: %d, %v", port, err)
	}
	waitCall(t, f, "udlisten 7174")
	peer := [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 16}
	f.push(verbs.CMEvent{ID: 1, Listener: 0, Event: verbs.CMConnectRequest, UD: &verbs.CMUD{},
		Local: verbs.CMAddr{Addr: cmTestGIDs[1], Port: 7174}, Peer: verbs.CMAddr{Addr: peer, Port: 40001}, PrivateData: []byte("hello")})
	req := c.next(t)
	if req.Type != proto.CMEventRequest || req.ID < proto.CMDaemonIDBase || req.Listener != 7 || req.QPType != uint8(abi.QPTypeUD) ||
		!bytes.Equal(req.GID, peer[:]) || req.SGIDIndex != 1 || req.RemotePort != 40001 || req.LocalPort != 7174 || string(req.PrivateData) != "hello" {
		t.Fatalf("UD request event %+v", req)
	}
	if n := c.held(connmgr.Connections); n != 1 {
		t.Errorf("%d connections charged for the request, want 1", n)
	}
	if err := m.Accept(c, proto.CMAcceptReq{ID: req.ID, QP: 3, PrivateData: make([]byte, 137)}, func(abi.QPType) (uint32, error) { return 0x22, nil }); proto.CodeOf(err) != proto.CodeInvalid {
		t.Errorf("137 bytes of private data in a SIDR_REP: %v", err)
	}
	answer := func(want abi.QPType) (uint32, error) {
		if want != abi.QPTypeUD {
			t.Errorf("a SIDR request answered by a %v QP", want)
		}
		return 0x22, nil
	}
	if err := m.Accept(c, proto.CMAcceptReq{ID: req.ID, QP: 3, PrivateData: []byte("rep")}, answer); err != nil {
		t.Fatal(err)
	}
	waitCall(t, f, `udaccept 1 qpn 0x22 "rep"`)
	waitCall(t, f, "destroy 1")
	if n := c.held(connmgr.Connections); n != 0 {
		t.Errorf("%d connections still charged after the SIDR_REP", n)
	}
	if err := m.Accept(c, proto.CMAcceptReq{ID: req.ID, QP: 3}, func(abi.QPType) (uint32, error) { return 0x22, nil }); proto.CodeOf(err) != proto.CodeNotFound {
		t.Errorf("a second accept of an answered request: %v", err)
	}

	// Rejected by the session.
	f.push(verbs.CMEvent{ID: 2, Listener: 0, Event: verbs.CMConnectRequest, UD: &verbs.CMUD{}, Local: verbs.CMAddr{Addr: cmTestGIDs[1], Port: 7174}})
	req = c.next(t)
	if err := m.Reject(c, proto.CMRejectReq{ID: req.ID, PrivateData: make([]byte, 137)}); proto.CodeOf(err) != proto.CodeInvalid {
		t.Errorf("137 bytes of private data in a SIDR_REP rejecting: %v", err)
	}
	if err := m.Reject(c, proto.CMRejectReq{ID: req.ID, PrivateData: []byte("no")}); err != nil {
		t.Fatal(err)
	}
	waitCall(t, f, `reject 2 "no"`)
	waitCall(t, f, "destroy 2")

	// A SIDR request to an RC listener's id: refused.
	if _, err := m.Listen(c, proto.CMListenReq{ID: 8, Port: 7175}, false); err != nil {
		t.Fatal(err)
	}
	f.push(verbs.CMEvent{ID: 4, Listener: 3, Event: verbs.CMConnectRequest, UD: &verbs.CMUD{}})
	waitCall(t, f, `reject 4 ""`)
	waitCall(t, f, "destroy 4")
	m.CloseSession(c)
	waitCall(t, f, "destroy 0")
	if n := c.held(connmgr.Listeners); n != 0 {
		t.Errorf("%d listeners charged after the session closed", n)
	}
}

// TestDeviceCMUDActive: a UD QP's dial through the device CM is a SIDR_REQ
// (at most 180 bytes of private data); the SIDR_REP is the software CM's
// Established of a UD dial: the peer's QPN and Q_Key, the GID and GID index
// of the address handle the kernel resolved, the private data; then
// nothing stays. A SIDR_REP with a status is Rejected with the reason the
// software CM gives it, and no reply in time is Timeout.
func TestDeviceCMUDActive(t *testing.T) {
	m, f := newTestDeviceCM(t)
	c := newFakeCMClient(4)
	peer := []byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 16}
	if _, err := m.ConnectUD(c, proto.CMConnectReq{ID: 5, QP: 1, Addr: peer, Port: 7174, PrivateData: make([]byte, 181)}, 0x33); proto.CodeOf(err) != proto.CodeInvalid {
		t.Errorf("181 bytes of private data in a SIDR_REQ: %v", err)
	}
	resp, err := m.ConnectUD(c, proto.CMConnectReq{ID: 5, QP: 1, Addr: peer, Port: 7174, PrivateData: make([]byte, 100)}, 0x33)
	if err != nil {
		t.Fatal(err)
	}
	waitCall(t, f, "udconnect 0")
	if !bytes.Equal(resp.LocalAddr, cmTestGIDs[1][:]) || resp.SGIDIndex != 1 || f.connect.Dst.Port != 7174 || len(f.connect.PrivateData) != 100 {
		t.Errorf("connect: %+v, the device's %+v", resp, f.connect)
	}
	ah := verbs.AHAttr{DGID: [16]byte(peer), SGIDIndex: 1, HopLimit: 64, IsGlobal: true}
	f.push(verbs.CMEvent{ID: 0, Listener: verbs.CMNone, Event: verbs.CMEstablished, QPN: 0x44,
		UD: &verbs.CMUD{QPN: 0x44, QKey: verbs.RDMAUDPQKey, AH: ah, Port: 1}, Peer: verbs.CMAddr{Addr: [16]byte(peer), Port: 7174}, PrivateData: []byte("rep")})
	ev := c.next(t)
	if ev.Type != proto.CMEventEstablished || ev.ID != 5 || ev.QPType != uint8(abi.QPTypeUD) || ev.QPN != 0x44 || ev.QKey != verbs.RDMAUDPQKey ||
		!bytes.Equal(ev.GID, peer) || ev.SGIDIndex != 1 || ev.RemotePort != 7174 || string(ev.PrivateData) != "rep" {
		t.Fatalf("UD established event %+v", ev)
	}
	waitCall(t, f, "destroy 0")
	if n := c.held(connmgr.Connections); n != 0 {
		t.Errorf("%d connections still charged after the SIDR_REP", n)
	}

	for i, tt := range []struct {
		status int32
		typ    proto.CMEventType
		reason cm.Reason
	}{
		{1, proto.CMEventRejected, cm.RejectInvalidServiceID},
		{2, proto.CMEventRejected, cm.RejectConsumer},
		{3, proto.CMEventRejected, cm.RejectNoResources},
		{4, proto.CMEventRejected, cm.RejectUnsupported},
		{-110, proto.CMEventTimeout, 0},
		{-113, proto.CMEventUnreachable, 0},
	} {
		id := uint32(10 + i)
		if _, err := m.ConnectUD(c, proto.CMConnectReq{ID: id, QP: 1, Addr: peer, Port: 7174}, 0x33); err != nil {
			t.Fatal(err)
		}
		hid := uint32(1 + i)
		f.push(verbs.CMEvent{ID: hid, Listener: verbs.CMNone, Event: verbs.CMUnreachable, Status: tt.status, UD: &verbs.CMUD{}})
		ev := c.next(t)
		if ev.Type != tt.typ || ev.ID != id || ev.Reason != uint16(tt.reason) || ev.Text == "" {
			t.Errorf("SIDR status %d: %+v, want type %d reason %d with a text", tt.status, ev, tt.typ, tt.reason)
		}
		waitCall(t, f, fmt.Sprintf("destroy %d", hid))
	}
	if n := c.held(connmgr.Connections); n != 0 {
		t.Errorf("%d connections still charged", n)
	}
}
