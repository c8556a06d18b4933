package verbs

import (
	"errors"
	"reflect"
	"testing"
)

func v4(a, b, c, d byte) [16]byte { return [16]byte{10: 0xff, 11: 0xff, 12: a, 13: b, 14: c, 15: d} }

// TestCMEventRoundTrip checks that the events the helper pushes decode to
// what was encoded, private data included.
func TestCMEventRoundTrip(t *testing.T) {
	for _, e := range []CMEvent{
		{ID: 3, Listener: 1, Event: CMConnectRequest, QPN: 0x11, ResponderResources: 4, InitiatorDepth: 2,
			Local: CMAddr{v4(10, 0, 2, 15), 7471}, Peer: CMAddr{v4(10, 0, 2, 15), 40000}, PrivateData: []byte("hello")},
		{ID: 0, Listener: CMNone, Event: CMRejected, Status: 28, PrivateData: make([]byte, MaxCMPrivateData)},
		{ID: 1023, Listener: CMNone, Event: CMAddrError, Status: -18},
		{ID: 2, Listener: CMNone, Event: CMTimewaitExit},
	} {
		got, err := ParseCMEvent(AppendCMEvent(nil, e))
		if err != nil {
			t.Fatalf("%s: %v", e.Event, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: got %+v, want %+v", e.Event, got, e)
		}
	}
}

// TestParseCMEventRefuses checks that a pushed CM event the protocol does
// not allow is ErrProtocol, saying what was wrong.
func TestParseCMEventRefuses(t *testing.T) {
	good := CMEvent{ID: 1, Listener: CMNone, Event: CMEstablished}
	mod := func(f func(e *CMEvent)) []byte { e := good; f(&e); return AppendCMEvent(nil, e) }
	raw := func(off int, v byte) []byte { b := AppendCMEvent(nil, good); b[HeaderSize+off] = v; return b }
	tests := []struct {
		name string
		msg  []byte
	}{
		{"id out of range", mod(func(e *CMEvent) { e.ID = MaxCMIDs })},
		{"unknown event", mod(func(e *CMEvent) { e.Event = CMTimewaitExit + 1 })},
		{"request without a listener", mod(func(e *CMEvent) { e.Event = CMConnectRequest })},
		{"listener on another event", mod(func(e *CMEvent) { e.Listener = 2 })},
		{"listener out of range", mod(func(e *CMEvent) { e.Event, e.Listener = CMConnectRequest, MaxCMIDs })},
		{"own listener", mod(func(e *CMEvent) { e.Event, e.Listener = CMConnectRequest, 1 })},
		{"positive status not a reject", mod(func(e *CMEvent) { e.Status = 5 })},
		{"status below errno", mod(func(e *CMEvent) { e.Status = -5000 })},
		{"reject reason over 16 bits", mod(func(e *CMEvent) { e.Event, e.Status = CMRejected, 0x10000 })},
		{"QPN over 24 bits", mod(func(e *CMEvent) { e.QPN = 1 << 24 })},
		{"private data over the limit", mod(func(e *CMEvent) { e.PrivateData = make([]byte, MaxCMPrivateData+1) })},
		{"padding", raw(22, 1)},
		{"port over 16 bits", raw(26, 1)},
		{"data length lies", raw(64, 3)},
		{"seq", func() []byte { b := AppendCMEvent(nil, good); ne.PutUint32(b[8:], 4); return b }()},
		{"another op", AppendHeader(nil, OpCompletions, 0, 0, 0)},
		{"short", AppendHeader(nil, OpCMEvent, 0, 0, 0)},
	}
	for _, tt := range tests {
		if _, err := ParseCMEvent(tt.msg); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", tt.name, err)
		}
	}
}

// TestCMQPAttrRoundTrip checks that the attributes rdma_init_qp_attr gives
// decode into the QPAttr OpModifyQP takes, and refusals of ones it never
// gives.
func TestCMQPAttrRoundTrip(t *testing.T) {
	a := QPAttr{State: QPStateRTR, PathMTU: 3, DestQPN: 0x12, RQPSN: 0xabcdef, DGID: v4(10, 0, 2, 15), SGIDIndex: 1,
		HopLimit: 64, TrafficClass: 4, IsGlobal: true, MaxDestRdAtomic: 4, MinRNRTimer: 12, FlowLabel: 7}
	got, mask, err := ParseCMQPAttr(AppendCMQPAttrReply(nil, 0x1234, a), QPStateRTR)
	if err != nil || mask != 0x1234 || got != a {
		t.Fatalf("got %+v mask %#x (%v), want %+v", got, mask, err, a)
	}
	if _, _, err := ParseCMQPAttr(AppendCMQPAttrReply(nil, 0, a), QPStateRTS); !errors.Is(err, ErrProtocol) {
		t.Errorf("attributes for another state: %v, want ErrProtocol", err)
	}
	for name, f := range map[string]func(*QPAttr){
		"PSN over 24 bits": func(a *QPAttr) { a.RQPSN = 1 << 24 },
		"MTU code":         func(a *QPAttr) { a.PathMTU = 6 },
		"retries":          func(a *QPAttr) { a.RetryCnt = 8 },
		"state":            func(a *QPAttr) { a.State = QPStateErr },
	} {
		b := a
		f(&b)
		if _, _, err := ParseCMQPAttr(AppendCMQPAttrReply(nil, 0, b), b.State); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
	if _, _, err := ParseCMQPAttr(make([]byte, cmQPAttrSize-1), QPStateRTR); !errors.Is(err, ErrProtocol) {
		t.Errorf("short: %v, want ErrProtocol", err)
	}
}

// TestParseCMID checks the id replies: ids below MaxCMIDs, ports 1..65535.
func TestParseCMID(t *testing.T) {
	tests := []struct {
		name     string
		b        []byte
		withPort bool
		ok       bool
	}{
		{"id", ne.AppendUint32(nil, 5), false, true},
		{"id and port", ne.AppendUint32(ne.AppendUint32(nil, 5), 7471), true, true},
		{"id too big", ne.AppendUint32(nil, MaxCMIDs), false, false},
		{"port 0", ne.AppendUint32(ne.AppendUint32(nil, 5), 0), true, false},
		{"port over 16 bits", ne.AppendUint32(ne.AppendUint32(nil, 5), 1<<16), true, false},
		{"no port", ne.AppendUint32(nil, 5), true, false},
	}
	for _, tt := range tests {
		_, _, err := ParseCMID(tt.b, tt.withPort)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrProtocol)) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// TestCMRequestLayouts checks the requests' lengths against the helper's
// (csrc/cm.c VH_CM_*_SIZE) and that private data follows the fixed part.
func TestCMRequestLayouts(t *testing.T) {
	pd := []byte("pd")
	for _, tt := range []struct {
		name string
		msg  []byte
		want int
	}{
		{"listen", AppendCMListen(nil, 8, CMAddr{Port: 1}), cmListenSize},
		{"connect", AppendCMConnect(nil, CMConnectParam{TimeoutMs: 1, QPN: 2, PrivateData: pd}), cmConnectSize + 2},
		{"accept", AppendCMAccept(nil, 1, 2, 3, 4, 5, pd), cmAcceptSize + 2},
		{"reject", AppendCMReject(nil, 1, pd), cmRejectSize + 2},
		{"establish", AppendCMID(nil, OpCMEstablish, 1), 4},
		{"qp attr", AppendCMQPAttr(nil, 1, QPStateRTR), 8},
	} {
		h, err := ParseHeader(tt.msg)
		if err != nil || int(h.Len()) != HeaderSize+tt.want {
			t.Errorf("%s: %v, %d bytes, want %d", tt.name, err, len(tt.msg), HeaderSize+tt.want)
		}
	}
}
