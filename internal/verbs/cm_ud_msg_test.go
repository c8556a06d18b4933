package verbs

import (
	"errors"
	"reflect"
	"testing"
)

// TestParseCMUDEvent: a UD id's events round-trip with what param.ud
// carries, and what a helper must not send is ErrProtocol: a reply's
// event on a UD id, a QPN or an address handle on an event other than
// ESTABLISHED, a positive status other than UNREACHABLE's SIDR status,
// out-of-range fields, private data that is not what it says.
func TestParseCMUDEvent(t *testing.T) {
	est := CMEvent{ID: 3, Listener: CMNone, Event: CMEstablished, UD: &CMUD{QPN: 0x12, QKey: RDMAUDPQKey,
		AH: AHAttr{DGID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 2}, SGIDIndex: 1, HopLimit: 64, TrafficClass: 4, FlowLabel: 0x12345, SL: 2, IsGlobal: true}, Port: 1},
		Local: CMAddr{Port: 40000}, Peer: CMAddr{Port: 7174}, PrivateData: []byte("rep")}
	est.QPN = est.UD.QPN
	req := CMEvent{ID: 4, Listener: 1, Event: CMConnectRequest, UD: &CMUD{}, PrivateData: []byte("hello")}
	with := func(e CMEvent, f func(*CMEvent)) []byte {
		u := *e.UD
		e.UD = &u
		f(&e)
		return AppendCMUDEvent(nil, e)
	}
	for _, tt := range []struct {
		name string
		msg  []byte
		want *CMEvent
	}{
		{"established", AppendCMUDEvent(nil, est), &est},
		{"request", AppendCMUDEvent(nil, req), &req},
		{"unreachable with a SIDR status", with(req, func(e *CMEvent) { e.Listener, e.Event, e.Status, e.PrivateData = CMNone, CMUnreachable, 2, nil }), nil},
		{"timed out", with(req, func(e *CMEvent) { e.Listener, e.Event, e.Status, e.PrivateData = CMNone, CMUnreachable, -110, nil }), nil},
		{"a reply on a UD id", with(est, func(e *CMEvent) { e.Event = CMConnectResponse }), nil},
		{"a QPN on a request", with(req, func(e *CMEvent) { e.UD.QPN = 5 }), nil},
		{"an AH on a request", with(req, func(e *CMEvent) { e.UD.AH.IsGlobal = true }), nil},
		{"a positive status on ESTABLISHED", with(est, func(e *CMEvent) { e.Status = 1 }), nil},
		{"a status over 8 bits", with(req, func(e *CMEvent) { e.Listener, e.Event, e.Status = CMNone, CMUnreachable, 300 }), nil},
		{"QPN over 24 bits", with(est, func(e *CMEvent) { e.UD.QPN = 1 << 24 }), nil},
		{"flow label over 20 bits", with(est, func(e *CMEvent) { e.UD.AH.FlowLabel = 1 << 20 }), nil},
		{"SL over 4 bits", with(est, func(e *CMEvent) { e.UD.AH.SL = 16 }), nil},
		{"id too big", with(est, func(e *CMEvent) { e.ID = MaxCMIDs }), nil},
		{"a listener on ESTABLISHED", with(est, func(e *CMEvent) { e.Listener = 1 }), nil},
		{"no listener on a request", with(req, func(e *CMEvent) { e.Listener = CMNone }), nil},
		{"unknown event", with(est, func(e *CMEvent) { e.Event = 99 }), nil},
		{"short", AppendCMUDEvent(nil, est)[:HeaderSize+cmUDEventSize-1], nil},
		{"an RC event", AppendCMEvent(nil, CMEvent{ID: 1, Listener: CMNone, Event: CMEstablished}), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseCMUDEvent(tt.msg)
			ok := tt.want != nil || tt.name == "unreachable with a SIDR status" || tt.name == "timed out"
			if ok != (err == nil) || (err != nil && !errors.Is(err, ErrProtocol)) {
				t.Fatalf("ParseCMUDEvent: %+v, %v; want ok %v (or ErrProtocol)", e, err, ok)
			}
			if tt.want != nil && !reflect.DeepEqual(e, *tt.want) {
				t.Errorf("got %+v (UD %+v), want %+v (UD %+v)", e, e.UD, *tt.want, tt.want.UD)
			}
			if ok {
				if p, err := parseCMPush(tt.msg); err != nil || !reflect.DeepEqual(p, e) {
					t.Errorf("parseCMPush: %+v %v", p, err)
				}
			}
		})
	}
	if h, _ := ParseHeader(AppendCMUDAccept(nil, 1, 2, []byte("pd"))); int(h.Len()) != HeaderSize+cmUDAcceptSize+2 {
		t.Errorf("OpCMUDAccept of %d bytes, want %d", h.Len(), HeaderSize+cmUDAcceptSize+2)
	}
}
