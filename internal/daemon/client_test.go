package daemon_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// rawClient speaks the command protocol byte by byte, so that tests can send
// what no well-behaved library would.
type rawClient struct {
	t    testing.TB
	conn *proto.Conn
	id   uint32
}

func dial(t testing.TB, sock string) *rawClient {
	t.Helper()
	c, err := proto.Dial(sock)
	if err != nil {
		t.Fatalf("dial %s: %v", sock, err)
	}
	rc := &rawClient{t: t, conn: c}
	t.Cleanup(func() { c.Close() })
	return rc
}

func (c *rawClient) Close() { c.conn.Close() }

// request builds a well-formed request message with a raw body.
func request(op proto.Op, id uint32, body []byte) []byte {
	h := proto.Header{Version: proto.Version, Kind: proto.KindRequest, Op: op, ID: id, BodyLen: uint32(len(body))}
	return append(proto.AppendHeader(nil, h), body...)
}

// sendRaw writes one datagram, with descriptors.
func (c *rawClient) sendRaw(msg []byte, fds ...int) {
	c.t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.conn.Raw().WriteMsgUnix(msg, oob, nil); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

type reply struct {
	h    proto.Header
	body []byte
	fds  []int
	err  error // the connection failed or the reply did not decode
}

// msg returns the error message of an error reply.
func (r reply) msg() string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error
}

// recv reads the next reply, skipping asynchronous events.
func (c *rawClient) recv() reply {
	for {
		h, body, fds, err := c.conn.Recv()
		if err == nil && h.Kind == proto.KindEvent {
			proto.CloseFDs(fds)
			continue
		}
		return reply{h: h, body: append([]byte(nil), body...), fds: fds, err: err}
	}
}

// call sends a request with a raw body and returns the reply to it; the
// caller owns the descriptors of the reply.
func (c *rawClient) call(op proto.Op, body []byte, fds ...int) reply {
	c.t.Helper()
	c.id++
	c.sendRaw(request(op, c.id, body), fds...)
	r := c.recv()
	if r.err != nil {
		c.t.Fatalf("%v: no reply: %v", op, r.err)
	}
	if r.h.Kind != proto.KindReply || r.h.ID != c.id || r.h.Op != op {
		c.t.Fatalf("%v: reply header %+v does not answer request %d", op, r.h, c.id)
	}
	return r
}

// ok calls op with v encoded and fails the test unless it succeeds; it
// decodes the reply into out (if not nil) and closes received descriptors.
func (c *rawClient) ok(op proto.Op, v any, out any) {
	c.t.Helper()
	var body []byte
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	r := c.call(op, body)
	proto.CloseFDs(r.fds)
	if r.h.Code != proto.CodeOK {
		c.t.Fatalf("%v: %v: %s", op, r.h.Code, r.msg())
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			c.t.Fatalf("%v: decode reply %s: %v", op, r.body, err)
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// checkAlive opens a fresh connection and opens vrdma0 on it.
func checkAlive(t testing.TB, sock string) {
	t.Helper()
	c := dial(t, sock)
	defer c.Close()
	var resp proto.HelloResp
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "alive-check"}, &resp)
	if resp.Device == nil || resp.Device.Name != "vrdma0" {
		t.Fatalf("hello after the bad input: %+v", resp)
	}
}

// closedByPeer reports whether the daemon closed the connection.
func closedByPeer(c *rawClient) bool {
	r := c.recv()
	proto.CloseFDs(r.fds)
	return r.err != nil && (errors.Is(r.err, net.ErrClosed) || errors.Is(r.err, io.EOF) || errors.Is(r.err, unix.ECONNRESET))
}

// memfd creates a memfd of size bytes, sealed against resizing if sealed.
func memfd(t testing.TB, size int, sealed bool) int {
	t.Helper()
	fd, err := unix.MemfdCreate("daemon-test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatalf("memfd_create: %v", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	if sealed {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// openFDs counts this process's descriptors; the daemon runs in it.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// waitSessions waits until the daemon counts n sessions (closed connections
// end their sessions asynchronously).
func waitSessions(t testing.TB, d *daemon.Daemon, n int) {
	t.Helper()
	for d.Stats().Sessions != n {
		time.Sleep(time.Millisecond)
	}
}
