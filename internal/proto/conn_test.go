package proto

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// connPair returns two connected Conns over a unix SOCK_SEQPACKET pair.
func connPair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(fd int) *Conn {
		f := os.NewFile(uintptr(fd), "seqpacket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return NewClientConn(c.(*net.UnixConn))
	}
	a, b := wrap(fds[0]), wrap(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	deadline := time.Now().Add(30 * time.Second) // a hang fails the test
	_ = a.Raw().SetDeadline(deadline)
	_ = b.Raw().SetDeadline(deadline)
	return a, b
}

// listReply is a reply body of about n bytes.
type listReply struct {
	Items []string `json:"items"`
}

func bigReply(n int) listReply {
	var r listReply
	for size := 0; size < n; size += 1002 {
		r.Items = append(r.Items, strings.Repeat("a", 1000))
	}
	return r
}

// TestReplyParts: a reply of any size up to MaxReply arrives whole, in one
// Recv, with its descriptors, and the message after it arrives after it.
func TestReplyParts(t *testing.T) {
	for _, size := range []int{10, MaxBody - 100, MaxBody + 1, 3*MaxBody + 7, 1 << 20} {
		a, b := connPair(t)
		want := bigReply(size)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			err := a.Send(Header{Kind: KindReply, Op: OpListInstances, ID: 7}, want, int(r.Fd()))
			if err == nil {
				err = a.Send(Header{Kind: KindEvent, Op: OpEvent}, Event{Type: 1})
			}
			done <- err
		}()
		h, body, fds, err := b.Recv()
		if err != nil {
			t.Fatalf("%d bytes: Recv: %v", size, err)
		}
		var got listReply
		if err := Decode(body, &got); err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		if h.Kind != KindReply || h.More || h.ID != 7 || h.Op != OpListInstances || len(got.Items) != len(want.Items) || int(h.BodyLen) != len(body) {
			t.Errorf("%d bytes: header %+v, %d items, want %d", size, h, len(got.Items), len(want.Items))
		}
		if len(fds) != 1 {
			t.Errorf("%d bytes: %d descriptors, want 1", size, len(fds))
		}
		CloseFDs(fds)
		if h, _, _, err := b.Recv(); err != nil || h.Kind != KindEvent {
			t.Errorf("%d bytes: the message after the reply: %+v, %v", size, h, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%d bytes: Send: %v", size, err)
		}
		r.Close()
		w.Close()
	}
}

// TestSendRefusesTooLarge: a request or event larger than one message, or
// a reply larger than MaxReply, is refused with ErrTooLarge and nothing
// goes out.
func TestSendRefusesTooLarge(t *testing.T) {
	cases := []struct {
		name string
		h    Header
		size int
	}{
		{"request", Header{Kind: KindRequest, Op: OpHello}, MaxBody + 10},
		{"event", Header{Kind: KindEvent, Op: OpEvent}, MaxBody + 10},
		{"reply above MaxReply", Header{Kind: KindReply, Op: OpListInstances}, MaxReply + 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := connPair(t)
			err := a.Send(tc.h, bigReply(tc.size))
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Send: %v, want ErrTooLarge", err)
			}
			_ = b.Raw().SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			if _, _, _, err := b.Recv(); err == nil {
				t.Errorf("a refused message was sent")
			}
		})
	}
}

// TestRecvRefusesBadParts: parts that do not follow each other, a request
// or an event marked KindMore, and a reply that grows past MaxReply are
// errors, not a reply.
func TestRecvRefusesBadParts(t *testing.T) {
	part := func(h Header, n int) []byte {
		h.Version = Version
		return message(h, make([]byte, n))
	}
	reply := Header{Kind: KindReply, Op: OpListInstances, ID: 3, More: true}
	other := reply
	other.ID = 4
	event := Header{Kind: KindEvent, Op: OpEvent}
	last := reply
	last.More = false
	request := Header{Kind: KindRequest, Op: OpHello, More: true}
	cases := []struct {
		name string
		msgs [][]byte
		want error
	}{
		{"another id", [][]byte{part(reply, 10), part(other, 10)}, ErrParts},
		{"an event between", [][]byte{part(reply, 10), part(event, 10)}, ErrParts},
		{"a request with more", [][]byte{part(request, 10)}, ErrKind},
		{"an event with more", [][]byte{part(Header{Kind: KindEvent, Op: OpEvent, More: true}, 10)}, ErrKind},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := connPair(t)
			for _, m := range tc.msgs {
				if _, _, err := a.Raw().WriteMsgUnix(m, nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, _, err := b.Recv(); !errors.Is(err, tc.want) {
				t.Errorf("Recv: %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("past MaxReply", func(t *testing.T) {
		a, b := connPair(t)
		go func() {
			for n := 0; n <= MaxReply; n += MaxBody {
				if _, _, err := a.Raw().WriteMsgUnix(part(reply, MaxBody), nil, nil); err != nil {
					return
				}
			}
			_, _, _ = a.Raw().WriteMsgUnix(part(last, 1), nil, nil)
		}()
		if _, _, _, err := b.Recv(); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Recv: %v, want ErrTooLarge", err)
		}
	})
}

// FuzzRecvParts: whatever messages a peer sends (here: data cut into
// messages at each 0xff byte, each with a fuzzed header), Recv never
// panics, and a reply it returns is whole: not marked KindMore, its length
// its body's, at most MaxReply.
func FuzzRecvParts(f *testing.F) {
	reply := func(more bool, id uint32, body string) []byte {
		return message(Header{Version: Version, Kind: KindReply, More: more, Op: OpListInstances, ID: id}, []byte(body))
	}
	join := func(msgs ...[]byte) []byte {
		var b []byte
		for _, m := range msgs {
			b = append(append(b, m...), 0xff)
		}
		return b
	}
	f.Add(join(reply(true, 1, "{\"a\":"), reply(false, 1, "1}")))
	f.Add(join(reply(true, 1, "{"), reply(false, 2, "}")))
	f.Add(join(reply(true, 1, "{"), message(Header{Version: Version, Kind: KindEvent, Op: OpEvent}, nil)))
	f.Add(join(reply(false, 3, "{}")))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := connPair(t)
		var msgs [][]byte
		for _, m := range bytes.Split(data, []byte{0xff}) {
			if len(m) > 0 && len(m) <= MaxMessage {
				msgs = append(msgs, m)
			}
		}
		for _, m := range msgs {
			if _, _, err := a.Raw().WriteMsgUnix(m, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		a.Close()
		for range len(msgs) + 1 {
			h, body, fds, err := b.Recv()
			CloseFDs(fds)
			if err != nil {
				if errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "EOF") {
					return
				}
				continue
			}
			if h.More || int(h.BodyLen) != len(body) || len(body) > MaxReply {
				t.Fatalf("Recv returned %+v with a %d-byte body", h, len(body))
			}
		}
	})
}
