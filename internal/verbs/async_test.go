package verbs

import (
	"errors"
	"testing"
)

// TestParseAsyncEvent: a pushed event is taken only with a known type and
// an element that fits it; anything else breaks the protocol.
func TestParseAsyncEvent(t *testing.T) {
	tests := []struct {
		name string
		e    AsyncEvent
		ok   bool
	}{
		{"QP fatal", AsyncEvent{Type: EventQPFatal, Element: 7, QPN: 0x11}, true},
		{"CQ error", AsyncEvent{Type: EventCQErr, Element: 2}, true},
		{"port error", AsyncEvent{Type: EventPortErr, Element: 1}, true},
		{"device fatal", AsyncEvent{Type: EventDeviceFatal}, true},
		{"unknown type", AsyncEvent{Type: maxEventType + 1}, false},
		{"QPN over 24 bits", AsyncEvent{Type: EventQPFatal, Element: 1, QPN: 1 << 24}, false},
		{"QP handle out of range", AsyncEvent{Type: EventQPReqErr, Element: maxElementHandle}, false},
		{"CQ event with a QPN", AsyncEvent{Type: EventCQErr, Element: 1, QPN: 5}, false},
		{"port 0", AsyncEvent{Type: EventPortActive}, false},
		{"port 256", AsyncEvent{Type: EventPortErr, Element: 256}, false},
		{"device event with an element", AsyncEvent{Type: EventDeviceFatal, Element: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAsyncEvent(AppendAsyncEvent(nil, tt.e))
			if tt.ok && (err != nil || got != tt.e) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.e)
			}
			if !tt.ok && !errors.Is(err, ErrProtocol) {
				t.Fatalf("got %+v, %v; want ErrProtocol", got, err)
			}
		})
	}
	long := append(AppendAsyncEvent(nil, AsyncEvent{Type: EventDeviceFatal}), 0)
	if _, err := ParseAsyncEvent(long); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a 13-byte body: %v, want ErrProtocol", err)
	}
}
