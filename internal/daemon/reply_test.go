package daemon

import (
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// lockedBuffer is a log destination safe for the daemon's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestReplyThatCannotBeSent: a reply above proto.MaxReply is not sent,
// and not dropped either: the daemon logs it and the client gets a short
// CodeLimit error of the same id.
func TestReplyThatCannotBeSent(t *testing.T) {
	var logged lockedBuffer
	d := testDaemon(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logged, nil)) })
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *proto.Conn {
		f := os.NewFile(uintptr(fd), "seqpacket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return proto.NewConn(c.(*net.UnixConn))
	}
	daemonEnd, client := conn(fds[0]), proto.NewClientConn(conn(fds[1]).Raw())
	defer daemonEnd.Close()
	defer client.Close()
	s := &session{d: d, conn: daemonEnd, cred: creds{known: true, uid: 1000}}
	go s.reply(proto.Header{Kind: proto.KindReply, Op: proto.OpListInstances, ID: 9}, struct{ S string }{strings.Repeat("x", proto.MaxReply)})
	_ = client.Raw().SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang fails the test
	h, body, _, err := client.Recv()
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	if h.ID != 9 || h.Code != proto.CodeLimit || len(body) > 1024 || !strings.Contains(string(body), "could not send its list_instances reply") {
		t.Fatalf("reply %+v, %d bytes: %.300s", h, len(body), body)
	}
	if !strings.Contains(logged.String(), "a reply could not be sent") {
		t.Fatalf("nothing logged: %q", logged.String())
	}
}

// TestReplyRefusedBySocket: a reply the socket refuses for a reason other
// than the client having gone (here EMSGSIZE: larger than the socket's
// send buffer) is logged and answered with a short error of the same id,
// not dropped; a reply to a client that has gone is dropped quietly.
func TestReplyRefusedBySocket(t *testing.T) {
	var logged lockedBuffer
	d := testDaemon(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logged, nil)) })
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The smallest send buffer the kernel allows (a few KiB): a message
	// larger is refused with EMSGSIZE, a short one goes.
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 1); err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "seqpacket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	daemonEnd, client := proto.NewConn(conn(fds[0])), proto.NewClientConn(conn(fds[1]))
	defer daemonEnd.Close()
	defer client.Close()
	s := &session{d: d, conn: daemonEnd, cred: creds{known: true, uid: 1000}}
	s.reply(proto.Header{Kind: proto.KindReply, Op: proto.OpListInstances, ID: 4}, struct{ S string }{strings.Repeat("x", 32<<10)})
	_ = client.Raw().SetReadDeadline(time.Now().Add(30 * time.Second)) // a dropped reply fails the test
	h, body, _, err := client.Recv()
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	if h.ID != 4 || h.Code != proto.CodeInternal || !strings.Contains(string(body), "could not send its list_instances reply") {
		t.Fatalf("reply %+v: %.300s", h, body)
	}
	if !strings.Contains(logged.String(), "a reply could not be sent") || !strings.Contains(logged.String(), "message too long") {
		t.Fatalf("not logged: %q", logged.String())
	}

	client.Close()
	before := logged.String()
	s.reply(proto.Header{Kind: proto.KindReply, Op: proto.OpListInstances, ID: 5}, struct{}{})
	if logged.String() != before {
		t.Errorf("a reply to a client that has gone was logged: %q", strings.TrimPrefix(logged.String(), before))
	}
}
