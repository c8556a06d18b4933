package daemon

import (
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// flakyListener fails its first accepts with errs, then accepts for real.
type flakyListener struct {
	*net.UnixListener
	errs  []error
	tries atomic.Int32
}

func (l *flakyListener) AcceptUnix() (*net.UnixConn, error) {
	if i := int(l.tries.Add(1)) - 1; i < len(l.errs) {
		return nil, &net.OpError{Op: "accept", Net: "unixpacket", Err: os.NewSyscallError("accept4", l.errs[i])}
	}
	return l.UnixListener.AcceptUnix()
}

func testDaemon(t *testing.T, edit func(*Config)) *Daemon {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "vrdma.sock"), HostName: "test"}
	if edit != nil {
		edit(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestServeSurvivesAcceptFailures: out of descriptors (EMFILE, ENFILE),
// out of memory, an aborted connection — Serve logs, waits and accepts
// again; it returns only when the daemon closes.
func TestServeSurvivesAcceptFailures(t *testing.T) {
	d := testDaemon(t, nil)
	fl := &flakyListener{UnixListener: d.ln.(*net.UnixListener),
		errs: []error{unix.EMFILE, unix.EMFILE, unix.ENFILE, unix.ENOMEM, unix.ECONNABORTED, unix.EPROTO}}
	d.ln = fl
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	c, err := proto.Dial(d.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.Raw().SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard
	if err := c.Send(proto.Header{Kind: proto.KindRequest, Op: proto.OpHello, ID: 1}, proto.HelloReq{}); err != nil {
		t.Fatal(err)
	}
	h, _, _, err := c.Recv()
	if err != nil || h.Code != proto.CodeOK || h.ID != 1 {
		t.Fatalf("hello after %d failed accepts: %+v, %v", len(fl.errs), h, err)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v while the daemon runs", err)
	default:
	}
	d.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve returned %v on Close, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
}

// TestRefusedSessionIsTold: a connection past its uid's session limit is
// answered (a reply to no request, with the reason) and closed, at once.
func TestRefusedSessionIsTold(t *testing.T) {
	d := testDaemon(t, func(c *Config) { c.UserLimits = Limits{Sessions: 1} })
	go d.Serve()
	first, err := proto.Dial(d.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := proto.Dial(d.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	h, body, _, err := second.Recv()
	if err != nil || h.Kind != proto.KindReply || h.ID != 0 || h.Code != proto.CodeLimit {
		t.Fatalf("the second session: %+v %s %v", h, body, err)
	}
	if _, _, _, err := second.Recv(); err == nil {
		t.Fatal("the refused connection stays open")
	}
	t.Logf("refusal: %s", body)
}

// TestRefuseReturnsWhenThePeerIsGone: refusing a connection whose peer
// has sent a request and closed already (reads then return 0, not an
// error) returns; the accept loop runs refuse itself.
func TestRefuseReturnsWhenThePeerIsGone(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, sends := range []int{0, 1, 2 * refuseDrain} {
		c, err := proto.Dial(ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < sends; i++ {
			if err := c.Send(proto.Header{Kind: proto.KindRequest, Op: proto.OpHello, ID: uint32(i + 1)}, proto.HelloReq{}); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		s, err := ln.AcceptUnix()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { refuse(s, proto.Errorf(proto.CodeLimit, "no"), refuseLinger); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // a hang guard
			t.Fatalf("refuse did not return for a peer gone after %d requests", sends)
		}
	}
}

// TestRefusalReachesAClientThatSpeaksLate: a client whose first request
// arrives while the daemon is refusing it (after the refusal is sent,
// before the connection closes) still reads the refusal, not a reset:
// closing a unix socket with a request unread makes the peer's next read
// fail even with the reply queued, so refuse must not close on one.
func TestRefusalReachesAClientThatSpeaksLate(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for i := range 300 {
		c, err := proto.Dial(ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.AcceptUnix()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { refuse(s, proto.Errorf(proto.CodeLimit, "no descriptor left"), refuseLinger); close(done) }()
		// Speak once the refusal is there, unread, as a client does whose
		// hello was slower than the daemon's answer.
		waitReadable(t, c)
		_ = c.Send(proto.Header{Kind: proto.KindRequest, Op: proto.OpHello, ID: 1}, proto.HelloReq{})
		h, body, _, err := c.Recv()
		c.Close()
		<-done
		if err != nil || h.Code != proto.CodeLimit {
			t.Fatalf("attempt %d: the client read %+v %s, %v: want the refusal (code %d)", i, h, body, err, proto.CodeLimit)
		}
	}
}

// waitReadable waits until c has a message to read, without reading it.
func waitReadable(t *testing.T, c *proto.Conn) {
	t.Helper()
	raw, err := c.Raw().SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var perr error
	if err := raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		_, perr = unix.Poll(fds, 10_000) // a hang guard
	}); err != nil {
		t.Fatal(err)
	}
	if perr != nil {
		t.Fatal(perr)
	}
}
