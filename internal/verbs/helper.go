package verbs

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// HelperEnv names the environment variable that points the daemon at a
// prebuilt helper (a host without a compiler: build it elsewhere against
// the same rdma-core and copy it).
const HelperEnv = "VRDMA_VERBS_HELPER"

// callTimeout bounds one request to the helper: generous, it turns a hung
// helper into an error instead of a hung command. (A variable for tests.)
var callTimeout = 20 * time.Second

// Helper is a running helper process and the daemon's end of its socket.
// Its methods may be called from any goroutine; requests are one at a time.
type Helper struct {
	mu     sync.Mutex
	conn   *net.UnixConn
	seq    uint32
	buf    []byte
	dead   error // set once the helper failed; every later call returns it
	cmd    *exec.Cmd
	stderr *tailBuffer
	waited chan struct{} // closed when cmd has been waited for
}

// StartHelper runs the helper program at path with its socket on
// descriptor 3 and waits for its hello. A helper that cannot start because
// the host has no libibverbs.so.1 gives an *Error of kind ErrNoRDMACore.
func StartHelper(path string) (*Helper, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("verbs helper: socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "verbs-helper"), os.NewFile(uintptr(fds[1]), "verbs-helper-child")
	cmd := exec.Command(path)
	cmd.ExtraFiles = []*os.File{theirs} // descriptor 3
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if v, ok := os.LookupEnv("LD_LIBRARY_PATH"); ok {
		cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	tail := &tailBuffer{max: 4096}
	cmd.Stderr = tail
	err = cmd.Start()
	theirs.Close() // the helper's now: its exit closes the socket
	if err != nil {
		ours.Close()
		return nil, &Error{Kind: ErrBuild, Msg: fmt.Sprintf("cannot run %s: %v", path, err)}
	}
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("verbs helper: %w", err)
	}
	h := newHelper(c.(*net.UnixConn))
	h.cmd, h.stderr = cmd, tail
	go func() { _ = cmd.Wait(); close(h.waited) }()
	if err := h.hello(); err != nil {
		h.Close()
		return nil, h.explain(err)
	}
	return h, nil
}

// newHelper wraps the daemon's end of a helper's socket (tests pass one
// end of a socketpair with a fake helper on the other).
func newHelper(c *net.UnixConn) *Helper {
	h := &Helper{conn: c, buf: make([]byte, MaxMessage+1), waited: make(chan struct{})}
	return h
}

// hello reads the helper's first message and checks its version.
func (h *Helper) hello() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	hdr, body, err := h.readLocked()
	if err != nil {
		return err
	}
	if hdr.Op() != OpHello || hdr.Status() != 0 || len(body) != 4 {
		return h.failLocked(protoErrorf("first message: op %d, status %d, %d-byte body; want a hello", hdr.Op(), hdr.Status(), len(body)))
	}
	if v := ne.Uint32(body); v != Version {
		return h.failLocked(protoErrorf("helper speaks version %d, the daemon %d: rebuild it (remove the prebuilt %s)", v, Version, HelperEnv))
	}
	return nil
}

// explain turns a helper that died at start into the reason it printed:
// the dynamic loader's "libibverbs.so.1: cannot open shared object file".
func (h *Helper) explain(err error) error {
	if h.cmd == nil || !errors.Is(err, ErrHelperGone) {
		return err
	}
	select {
	case <-h.waited:
	case <-time.After(5 * time.Second):
	}
	out := h.stderr.String()
	if strings.Contains(out, "libibverbs.so.1") && strings.Contains(out, "cannot open shared object") {
		return &Error{Kind: ErrNoRDMACore, Msg: "the helper cannot load it: install rdma-core's library and providers with `apt-get install libibverbs1 ibverbs-providers` (Debian, Ubuntu)"}
	}
	if out != "" {
		return &Error{Kind: ErrHelperGone, Msg: "it exited at start, saying: " + printable([]byte(strings.TrimSpace(out)))}
	}
	return err
}

// Call sends a request and returns its reply's body (valid until the next
// call). A reply with a status is an *Error of kind ErrDevice (ErrNoDevice
// for ENODEV) holding the helper's text; anything the protocol does not
// allow kills the helper and is ErrProtocol from then on.
func (h *Helper) Call(req []byte) ([]byte, error) { return h.CallFD(req, -1) }

// CallFD is Call passing the descriptor fd with the request (SCM_RIGHTS),
// unless it is negative; the helper gets its own copy.
func (h *Helper) CallFD(req []byte, fd int) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.callLocked(req, fd)
}

// callLocked is CallFD with h.mu held: the body stays valid while it is.
func (h *Helper) callLocked(req []byte, fd int) ([]byte, error) {
	if h.dead != nil {
		return nil, h.dead
	}
	rh, err := ParseHeader(req)
	if err != nil {
		return nil, fmt.Errorf("verbs helper: bad request: %w", err)
	}
	h.seq++
	ne.PutUint32(req[8:], h.seq)
	if err := h.conn.SetDeadline(time.Now().Add(callTimeout)); err != nil {
		return nil, h.failLocked(&Error{Kind: ErrHelperGone, Msg: err.Error()})
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if _, _, err := h.conn.WriteMsgUnix(req, oob, nil); err != nil {
		return nil, h.failLocked(&Error{Kind: ErrHelperGone, Msg: "sending a request: " + err.Error()})
	}
	hdr, body, err := h.readLocked()
	if err != nil {
		return nil, err
	}
	switch {
	case hdr.Op() != rh.Op()|OpReply:
		return nil, h.failLocked(protoErrorf("reply op %#x to request op %#x", hdr.Op(), rh.Op()))
	case hdr.Seq() != h.seq:
		return nil, h.failLocked(protoErrorf("reply seq %d to request %d", hdr.Seq(), h.seq))
	case hdr.Status() < 0 || hdr.Status() > 4095:
		return nil, h.failLocked(protoErrorf("status %d is no errno", hdr.Status()))
	case hdr.Status() != 0:
		kind := ErrDevice
		if hdr.Status() == int32(unix.ENODEV) {
			kind = ErrNoDevice
		}
		return nil, &Error{Kind: kind, Errno: hdr.Status(), Msg: printable(body)}
	}
	return body, nil
}

// readLocked reads one message; a short, long or malformed one fails the
// helper.
func (h *Helper) readLocked() (Header, []byte, error) {
	if err := h.conn.SetReadDeadline(time.Now().Add(callTimeout)); err != nil {
		return nil, nil, h.failLocked(&Error{Kind: ErrHelperGone, Msg: err.Error()})
	}
	n, _, flags, _, err := h.conn.ReadMsgUnix(h.buf, nil)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return nil, nil, h.failLocked(&Error{Kind: ErrTimeout, Msg: fmt.Sprintf("no reply in %v", callTimeout)})
	case err != nil:
		return nil, nil, h.failLocked(&Error{Kind: ErrHelperGone, Msg: err.Error()})
	case n == 0:
		return nil, nil, h.failLocked(&Error{Kind: ErrHelperGone, Msg: "it closed its socket"})
	case flags&unix.MSG_TRUNC != 0 || n > MaxMessage:
		return nil, nil, h.failLocked(protoErrorf("a message over %d bytes", MaxMessage))
	}
	hdr, err := ParseHeader(h.buf[:n])
	if err != nil {
		return nil, nil, h.failLocked(err)
	}
	return hdr, h.buf[HeaderSize:n], nil
}

// failLocked marks the helper dead with err, closes its socket and kills
// it; err is returned to every later call.
func (h *Helper) failLocked(err error) error {
	if h.dead == nil {
		h.dead = err
		h.conn.Close()
		if h.cmd != nil && h.cmd.Process != nil {
			_ = h.cmd.Process.Kill()
		}
	}
	return err
}

// Close stops the helper: closing its socket ends it; it is killed if it
// lingers.
func (h *Helper) Close() {
	h.mu.Lock()
	if h.dead == nil {
		h.dead = &Error{Kind: ErrHelperGone, Msg: "closed"}
		h.conn.Close()
	}
	h.mu.Unlock()
	if h.cmd == nil {
		return
	}
	select {
	case <-h.waited:
	case <-time.After(2 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.waited
	}
}

// tailBuffer keeps the first max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - t.b.Len(); room > 0 {
		if len(p) > room {
			t.b.Write(p[:room])
		} else {
			t.b.Write(p)
		}
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
