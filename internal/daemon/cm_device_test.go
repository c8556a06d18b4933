package daemon

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/verbs"
)

// fakeCMDevice is a device's CM that records the calls and answers
// rdma_init_qp_attr from a table; the test pushes its events.
type fakeCMDevice struct {
	mu      sync.Mutex
	calls   []string
	push    func(verbs.CMEvent)
	nextHID uint32
	attrs   map[uint32][2]verbs.QPAttr // by id: RTR, RTS
	connect verbs.CMConnectParam
}

func (f *fakeCMDevice) rec(format string, args ...any) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fakeCMDevice) called(s string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls {
		if c == s {
			return true
		}
	}
	return false
}

func (f *fakeCMDevice) CMOpen(h func(verbs.CMEvent)) error { f.push = h; return nil }
func (f *fakeCMDevice) CMListen(a verbs.CMAddr, backlog uint32) (uint32, uint16, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.nextHID
	f.nextHID++
	port := a.Port
	if port == 0 {
		port = 40000
	}
	f.calls = append(f.calls, fmt.Sprintf("listen %d", port))
	return id, port, nil
}
func (f *fakeCMDevice) CMConnect(p verbs.CMConnectParam) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.nextHID
	f.nextHID++
	f.connect = p
	f.calls = append(f.calls, fmt.Sprintf("connect %d qpn %#x", id, p.QPN))
	return id, nil
}
func (f *fakeCMDevice) CMAccept(id, qpn uint32, rr, idp, rnr uint8, pd []byte) error {
	f.rec("accept %d qpn %#x %q", id, qpn, pd)
	return nil
}
func (f *fakeCMDevice) CMReject(id uint32, pd []byte) error {
	f.rec("reject %d %q", id, pd)
	return nil
}
func (f *fakeCMDevice) CMEstablish(id uint32) error  { f.rec("establish %d", id); return nil }
func (f *fakeCMDevice) CMDisconnect(id uint32) error { f.rec("disconnect %d", id); return nil }
func (f *fakeCMDevice) CMDestroy(id uint32) error    { f.rec("destroy %d", id); return nil }
func (f *fakeCMDevice) CMQPAttr(id, state uint32) (verbs.QPAttr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.attrs[id]
	if !ok {
		return verbs.QPAttr{}, &verbs.Error{Kind: verbs.ErrDevice, Errno: 22, Msg: "no attributes"}
	}
	if state == verbs.QPStateRTR {
		return a[0], nil
	}
	return a[1], nil
}

// fakeCMClient is a session: its events, and its charges within a limit.
type fakeCMClient struct {
	events  chan proto.CMEvent
	mu      sync.Mutex
	charged map[connmgr.Resource]int
	limit   int
}

func newFakeCMClient(limit int) *fakeCMClient {
	return &fakeCMClient{events: make(chan proto.CMEvent, 16), charged: map[connmgr.Resource]int{}, limit: limit}
}
func (c *fakeCMClient) Emit(ev proto.CMEvent) { c.events <- ev }
func (c *fakeCMClient) Charge(r connmgr.Resource) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.charged[r] >= c.limit {
		return proto.Errorf(proto.CodeLimit, "over the limit")
	}
	c.charged[r]++
	return nil
}
func (c *fakeCMClient) Uncharge(r connmgr.Resource) { c.mu.Lock(); c.charged[r]--; c.mu.Unlock() }
func (c *fakeCMClient) held(r connmgr.Resource) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.charged[r]
}

func (c *fakeCMClient) next(t *testing.T) proto.CMEvent {
	t.Helper()
	select {
	case ev := <-c.events:
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no CM event in 20 s")
		return proto.CMEvent{}
	}
}

// waitCall waits until the device saw call s (the worker runs apart).
func waitCall(t *testing.T, f *fakeCMDevice, s string) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if f.called(s) {
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Fatalf("the device never saw %q; it saw %q", s, f.calls)
}

var cmTestGIDs = [][16]byte{{0xfe, 0x80, 15: 1}, {10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 15}}

func newTestDeviceCM(t *testing.T) (*deviceCM, *fakeCMDevice) {
	f := &fakeCMDevice{attrs: map[uint32][2]verbs.QPAttr{}}
	m, err := newDeviceCM("hca0", f, func() [][16]byte { return cmTestGIDs }, 3, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return m, f
}

// TestDeviceCMPassive: a session listening on a verbs uplink gets the
// device CM's connection request as the software CM's Request event, with
// the attributes its QP takes from rdma_init_qp_attr (the peer's QPN and
// GID, the MTU, the PSN to send from and the kernel's PSN to expect), the
// peer's address and private data; its accept is the device's REP naming
// its device QP; the RTU is Established; the peer's DREQ is Disconnected,
// answered with the DREP, and the id destroyed and its charge given back.
func TestDeviceCMPassive(t *testing.T) {
	m, f := newTestDeviceCM(t)
	c := newFakeCMClient(4)
	if _, err := m.Listen(c, proto.CMListenReq{ID: 7, Port: 80}, false); proto.CodeOf(err) != proto.CodePermission {
		t.Errorf("an unprivileged listen on port 80: %v, want a permission error", err)
	}
	port, err := m.Listen(c, proto.CMListenReq{ID: 7, Port: 7471}, false)
	if err != nil || port != 7471 {
		t.Fatalf("Listen: %d, %v", port, err)
	}
	if _, err := m.Listen(c, proto.CMListenReq{ID: 7, Port: 7472}, false); proto.CodeOf(err) != proto.CodeInvalid {
		t.Errorf("a second listener under id 7: %v", err)
	}
	dgid := [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 16}
	f.attrs[1] = [2]verbs.QPAttr{{State: verbs.QPStateRTR, DestQPN: 0x11, RQPSN: 0x100, DGID: dgid, PathMTU: 3, SGIDIndex: 1},
		{State: verbs.QPStateRTS, SQPSN: 0x200}}
	f.push(verbs.CMEvent{ID: 1, Listener: 0, Event: verbs.CMConnectRequest, QPN: 0x11, InitiatorDepth: 2,
		Local: verbs.CMAddr{Addr: cmTestGIDs[1], Port: 7471}, Peer: verbs.CMAddr{Addr: dgid, Port: 40001}, PrivateData: []byte("hello")})
	req := c.next(t)
	if req.Type != proto.CMEventRequest || req.ID < proto.CMDaemonIDBase || req.Listener != 7 || req.QPN != 0x11 ||
		req.PSN != 0x200 || req.LocalPSN == nil || *req.LocalPSN != 0x100 || req.MTU != 3 || req.SGIDIndex != 1 ||
		!bytes.Equal(req.GID, dgid[:]) || !bytes.Equal(req.RemoteAddr, dgid[:]) || req.RemotePort != 40001 ||
		req.LocalPort != 7471 || string(req.PrivateData) != "hello" || req.RdAtomic != 2 {
		t.Fatalf("request event %+v", req)
	}
	if err := m.Accept(c, proto.CMAcceptReq{ID: req.ID, QP: 3, PrivateData: []byte("rep")}, func(want abi.QPType) (uint32, error) {
		if want != abi.QPTypeRC {
			t.Errorf("an RC request answered by a %v QP", want)
		}
		return 0x22, nil
	}); err != nil {
		t.Fatal(err)
	}
	waitCall(t, f, `accept 1 qpn 0x22 "rep"`)
	f.push(verbs.CMEvent{ID: 1, Listener: verbs.CMNone, Event: verbs.CMEstablished})
	if ev := c.next(t); ev.Type != proto.CMEventEstablished || ev.ID != req.ID {
		t.Errorf("after the RTU: %+v, want Established", ev)
	}
	if err := m.Reject(c, proto.CMRejectReq{ID: req.ID}); proto.CodeOf(err) != proto.CodeState {
		t.Errorf("rejecting an established connection: %v", err)
	}
	f.push(verbs.CMEvent{ID: 1, Listener: verbs.CMNone, Event: verbs.CMDisconnected})
	if ev := c.next(t); ev.Type != proto.CMEventDisconnected || ev.ID != req.ID {
		t.Errorf("after the peer's DREQ: %+v, want Disconnected", ev)
	}
	waitCall(t, f, "disconnect 1")
	waitCall(t, f, "destroy 1")
	if n := c.held(connmgr.Connections); n != 0 {
		t.Errorf("%d connections still charged after the end", n)
	}

	// A request to a listener that is gone, and one over the session's
	// limit, are rejected by the device and never reach a session.
	f.push(verbs.CMEvent{ID: 9, Listener: 5, Event: verbs.CMConnectRequest})
	waitCall(t, f, `reject 9 ""`)
	waitCall(t, f, "destroy 9")
	c.limit = 0
	f.push(verbs.CMEvent{ID: 10, Listener: 0, Event: verbs.CMConnectRequest})
	waitCall(t, f, `reject 10 ""`)
	select {
	case ev := <-c.events:
		t.Errorf("a refused request reached the session: %+v", ev)
	default:
	}
	m.CloseSession(c)
	waitCall(t, f, "destroy 0")
	if n := c.held(connmgr.Listeners); n != 0 {
		t.Errorf("%d listeners charged after the session closed", n)
	}
}

// TestDeviceCMActive: a session's connect through the device CM names its
// device QP; the reply is the software CM's Reply with the attributes its
// QP takes (LocalPSN the kernel's); its accept is the RTU; its disconnect
// the DREQ, and the peer's answer DisconnectDone. A rejection carries the
// reason and private data; an address the device cannot reach is
// Unreachable.
func TestDeviceCMActive(t *testing.T) {
	m, f := newTestDeviceCM(t)
	c := newFakeCMClient(4)
	peer := []byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 16}
	resp, err := m.Connect(c, proto.CMConnectReq{ID: 5, QP: 1, Addr: peer, Port: 7471, RdAtomic: 4, PrivateData: []byte("req")}, 0x33)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(resp.LocalAddr, cmTestGIDs[1][:]) || resp.SGIDIndex != 1 {
		t.Errorf("connect's local address %x index %d, want the port's IPv4 GID at 1", resp.LocalAddr, resp.SGIDIndex)
	}
	if p := f.connect; p.QPN != 0x33 || p.Dst.Port != 7471 || !bytes.Equal(p.Dst.Addr[:], peer) || string(p.PrivateData) != "req" || p.InitiatorDepth != 4 {
		t.Errorf("the device's connect %+v", p)
	}
	if _, err := m.Connect(c, proto.CMConnectReq{ID: 6, QP: 1, Addr: peer, Port: 7471, PrivateData: make([]byte, 57)}, 0x33); proto.CodeOf(err) != proto.CodeInvalid {
		t.Errorf("57 bytes of private data: %v", err)
	}
	f.attrs[0] = [2]verbs.QPAttr{{State: verbs.QPStateRTR, DestQPN: 0x44, RQPSN: 0x300, DGID: [16]byte(peer), PathMTU: 3},
		{State: verbs.QPStateRTS, SQPSN: 0x400}}
	f.push(verbs.CMEvent{ID: 0, Listener: verbs.CMNone, Event: verbs.CMConnectResponse, QPN: 0x44, ResponderResources: 2, PrivateData: []byte("rep")})
	rep := c.next(t)
	if rep.Type != proto.CMEventReply || rep.ID != 5 || rep.QPN != 0x44 || rep.PSN != 0x400 || rep.LocalPSN == nil ||
		*rep.LocalPSN != 0x300 || rep.RdAtomic != 2 || string(rep.PrivateData) != "rep" {
		t.Fatalf("reply event %+v", rep)
	}
	if err := m.Accept(c, proto.CMAcceptReq{ID: 5}, nil); err != nil {
		t.Fatal(err)
	}
	waitCall(t, f, "establish 0")
	if err := m.Disconnect(c, proto.CMDisconnectReq{ID: 5}); err != nil {
		t.Fatal(err)
	}
	waitCall(t, f, "disconnect 0")
	f.push(verbs.CMEvent{ID: 0, Listener: verbs.CMNone, Event: verbs.CMDisconnected})
	if ev := c.next(t); ev.Type != proto.CMEventDisconnectDone || ev.ID != 5 {
		t.Errorf("the peer's DREP: %+v, want DisconnectDone", ev)
	}
	waitCall(t, f, "destroy 0")

	if _, err := m.Connect(c, proto.CMConnectReq{ID: 6, QP: 1, Addr: peer, Port: 7471}, 0x33); err != nil {
		t.Fatal(err)
	}
	f.push(verbs.CMEvent{ID: 1, Listener: verbs.CMNone, Event: verbs.CMRejected, Status: 28, PrivateData: []byte("no")})
	if ev := c.next(t); ev.Type != proto.CMEventRejected || ev.ID != 6 || ev.Reason != 28 || string(ev.PrivateData) != "no" {
		t.Errorf("rejected: %+v", ev)
	}
	if _, err := m.Connect(c, proto.CMConnectReq{ID: 8, QP: 1, Addr: peer, Port: 7471}, 0x33); err != nil {
		t.Fatal(err)
	}
	f.push(verbs.CMEvent{ID: 2, Listener: verbs.CMNone, Event: verbs.CMAddrError, Status: -18})
	if ev := c.next(t); ev.Type != proto.CMEventUnreachable || ev.ID != 8 {
		t.Errorf("an address error: %+v, want Unreachable", ev)
	}
	waitCall(t, f, "destroy 2")
	if n := c.held(connmgr.Connections); n != 0 {
		t.Errorf("%d connections still charged", n)
	}
	if err := m.Accept(c, proto.CMAcceptReq{ID: 8}, nil); proto.CodeOf(err) != proto.CodeNotFound {
		t.Errorf("accepting a connection that ended: %v", err)
	}
	// Resolving: the port's GID of the address's family, and its MTU; the
	// device's CM resolves the route when it connects.
	if r, err := m.Resolve(proto.CMResolveReq{Addr: peer}); err != nil || !bytes.Equal(r.LocalAddr, cmTestGIDs[1][:]) || r.SGIDIndex != 1 || r.MTU != 3 || r.Local {
		t.Errorf("Resolve: %+v, %v", r, err)
	}
	if _, err := m.Resolve(proto.CMResolveReq{Addr: peer[:4]}); proto.CodeOf(err) != proto.CodeInvalid {
		t.Errorf("resolving a 4-byte address: %v", err)
	}
}
