package verbs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestPushedEventsFake: an async event the helper pushes reaches the
// event handler, between completions, in order; one that breaks the
// protocol (an unknown type, a port event for port 0) fails the helper
// with ErrProtocol and reaches no handler.
func TestPushedEventsFake(t *testing.T) {
	wcs := func(cq uint32, w WC) []byte {
		body := AppendWCs(ne.AppendUint32(nil, cq), []WC{w})
		return append(AppendHeader(nil, OpCompletions, 0, 0, len(body)), body...)
	}
	qpFatal := AsyncEvent{Type: EventQPFatal, Element: 2, QPN: 0x11}
	tests := []struct {
		name string
		msgs [][]byte
		want error
	}{
		{"good", [][]byte{wcs(3, WC{WRID: 1, QPN: 0x11}), AppendAsyncEvent(nil, qpFatal), AppendAsyncEvent(nil, AsyncEvent{Type: EventDeviceFatal})}, nil},
		{"unknown type", [][]byte{AppendAsyncEvent(nil, AsyncEvent{Type: 99})}, ErrProtocol},
		{"port 0", [][]byte{AppendAsyncEvent(nil, AsyncEvent{Type: EventPortErr})}, ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			ours := os.NewFile(uintptr(fds[0]), "ours")
			c, err := net.FileConn(ours)
			ours.Close()
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				defer unix.Close(fds[1])
				buf, oob := make([]byte, MaxMessage), make([]byte, unix.CmsgSpace(4))
				unix.Write(fds[1], helloMsg(Version))
				for {
					n, oobn, _, _, err := unix.Recvmsg(fds[1], buf, oob, 0)
					if err != nil || n == 0 {
						return
					}
					req := Header(buf[:HeaderSize])
					if req.Op() != OpCreateCQ {
						unix.Write(fds[1], reply(req, 0, nil))
						continue
					}
					unix.Write(fds[1], reply(req, 0, ne.AppendUint32(ne.AppendUint32(nil, 3), 64)))
					cm, err := unix.ParseSocketControlMessage(oob[:oobn])
					if err != nil || len(cm) != 1 {
						continue
					}
					pfd, err := unix.ParseUnixRights(&cm[0])
					if err != nil || len(pfd) != 1 {
						continue
					}
					for _, m := range tt.msgs {
						unix.Write(pfd[0], m)
					}
					defer unix.Close(pfd[0])
				}
			}()
			h := newHelper(c.(*net.UnixConn))
			defer h.Close()
			if err := h.hello(); err != nil {
				t.Fatal(err)
			}
			d := &Device{Name: "rxe0", Attr: rxeAttr, h: h}
			got := make(chan string, 8)
			d.SetCompletionHandler(func(cq uint32, w []WC) { got <- fmt.Sprintf("wc %d %d", cq, w[0].WRID) })
			d.SetEventHandler(func(e AsyncEvent) { got <- fmt.Sprintf("event %+v", e) })
			if _, err := d.CreateCQ(64, true); err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				for _, want := range []string{"wc 3 1", fmt.Sprintf("event %+v", qpFatal), fmt.Sprintf("event %+v", AsyncEvent{Type: EventDeviceFatal})} {
					select {
					case g := <-got:
						if g != want {
							t.Errorf("the handlers got %q, want %q", g, want)
						}
					case <-time.After(20 * time.Second):
						t.Fatalf("no %q in 20 s", want)
					}
				}
				return
			}
			for end := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
				_, err := h.Call(AppendHeader(nil, OpPing, 0, 0, 0))
				if errors.Is(err, tt.want) {
					break
				}
				if err != nil || time.Now().After(end) {
					t.Fatalf("after the bad push, a call gave %v, want %v", err, tt.want)
				}
			}
			if len(got) != 0 {
				t.Errorf("a handler got %q from a push that broke the protocol", <-got)
			}
		})
	}
}
