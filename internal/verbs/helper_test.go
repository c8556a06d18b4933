package verbs

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeHelper serves the helper's end of a socketpair: hello is its first
// message (nil: none), then answer replies to each request; a nil reply
// closes the socket (the helper died).
func fakeHelper(t *testing.T, hello []byte, answer func(req Header, body []byte) []byte) *Helper {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer theirs.Close()
		fd := int(theirs.Fd())
		if hello == nil {
			return
		}
		if _, err := unix.Write(fd, hello); err != nil {
			return
		}
		buf := make([]byte, MaxMessage)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n == 0 {
				return
			}
			h, err := ParseHeader(buf[:n])
			if err != nil {
				t.Errorf("the daemon sent a bad request: %v", err)
				return
			}
			r := answer(h, buf[HeaderSize:n])
			if r == nil {
				return
			}
			if _, err := unix.Write(fd, r); err != nil {
				return
			}
		}
	}()
	h := newHelper(c.(*net.UnixConn))
	t.Cleanup(func() { h.Close(); <-done })
	return h
}

func helloMsg(v uint32) []byte { return ne.AppendUint32(AppendHeader(nil, OpHello, 0, 0, 4), v) }

func reply(req Header, status int32, body []byte) []byte {
	return append(AppendHeader(nil, req.Op()|OpReply, req.Seq(), status, len(body)), body...)
}

var rxeAttr = DeviceAttr{PhysPortCnt: 1, MaxQP: 1 << 17, MaxSGE: 32, AtomicCap: 1, NodeType: 1, Transport: TransportIB, FWVer: "0.0.0"}

// TestFakeHelper drives the daemon's side against helpers that behave,
// die, lie or send garbage: each gives its typed error, and a helper that
// broke the protocol is not asked again.
func TestFakeHelper(t *testing.T) {
	good := func(req Header, body []byte) []byte {
		switch req.Op() {
		case OpOpen:
			return reply(req, 0, AppendDeviceAttr(nil, rxeAttr))
		case OpQueryPort:
			return reply(req, 0, AppendPortAttr(nil, PortAttr{State: 4, ActiveMTU: 3, LinkLayer: LinkLayerEthernet, GIDTableLen: 16,
				GIDs: []GIDEntry{{Index: 1, Type: GIDTypeRoCEv2, GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 47, 14: 91, 15: 1}}}}))
		}
		return reply(req, int32(unix.EOPNOTSUPP), []byte("unknown op"))
	}
	tests := []struct {
		name    string
		hello   []byte
		answer  func(Header, []byte) []byte
		helloOK bool
		want    error // of OpenDevice; nil: it opens and queries
	}{
		{name: "good", hello: helloMsg(Version), answer: good, helloOK: true},
		{name: "dies before hello", hello: nil, want: ErrHelperGone},
		{name: "wrong version", hello: helloMsg(Version + 1), want: ErrProtocol},
		{name: "hello is garbage", hello: []byte("garbage that is long enough"), want: ErrProtocol},
		{name: "dies on open", hello: helloMsg(Version), helloOK: true, answer: func(Header, []byte) []byte { return nil }, want: ErrHelperGone},
		{name: "wrong seq", hello: helloMsg(Version), helloOK: true, want: ErrProtocol,
			answer: func(req Header, _ []byte) []byte {
				return append(AppendHeader(nil, req.Op()|OpReply, req.Seq()+1, 0, devAttrSize), AppendDeviceAttr(nil, rxeAttr)...)
			}},
		{name: "wrong op", hello: helloMsg(Version), helloOK: true, want: ErrProtocol,
			answer: func(req Header, _ []byte) []byte {
				return append(AppendHeader(nil, OpQueryPort|OpReply, req.Seq(), 0, devAttrSize), AppendDeviceAttr(nil, rxeAttr)...)
			}},
		{name: "length lie", hello: helloMsg(Version), helloOK: true, want: ErrProtocol,
			answer: func(req Header, _ []byte) []byte {
				m := reply(req, 0, AppendDeviceAttr(nil, rxeAttr))
				ne.PutUint32(m, 12)
				return m
			}},
		{name: "short attributes", hello: helloMsg(Version), helloOK: true, want: ErrProtocol,
			answer: func(req Header, _ []byte) []byte { return reply(req, 0, []byte{1, 2, 3}) }},
		{name: "negative status", hello: helloMsg(Version), helloOK: true, want: ErrProtocol,
			answer: func(req Header, _ []byte) []byte { return reply(req, -5, nil) }},
		{name: "no such device", hello: helloMsg(Version), helloOK: true, want: ErrNoDevice,
			answer: func(req Header, _ []byte) []byte { return reply(req, int32(unix.ENODEV), []byte("mlx5_0 mlx5_1")) }},
		{name: "device error", hello: helloMsg(Version), helloOK: true, want: ErrDevice,
			answer: func(req Header, _ []byte) []byte {
				return reply(req, int32(unix.EPERM), []byte("ibv_open_device: denied\x1b[2J"))
			}},
		{name: "bad port reply", hello: helloMsg(Version), helloOK: true, want: ErrProtocol,
			answer: func(req Header, b []byte) []byte {
				if req.Op() == OpQueryPort {
					return reply(req, 0, AppendPortAttr(nil, PortAttr{ActiveMTU: 9}))
				}
				return good(req, b)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakeHelper(t, tt.hello, tt.answer)
			err := h.hello()
			if tt.helloOK != (err == nil) {
				t.Fatalf("hello: %v, want ok=%v", err, tt.helloOK)
			}
			if err != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("hello: %v, want %v", err, tt.want)
				}
				return
			}
			d, err := OpenDevice(h, "rxe0", 1)
			if err == nil {
				var p PortAttr
				p, err = d.QueryPort()
				if err == nil && (len(p.GIDs) != 1 || p.LinkLayer != LinkLayerEthernet) {
					t.Fatalf("QueryPort = %+v", p)
				}
			}
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("open and query: %v, want %v", err, tt.want)
			}
			if err != nil && strings.ContainsAny(err.Error(), "\x1b") {
				t.Errorf("the helper's text reached the error raw: %q", err)
			}
			if errors.Is(err, ErrProtocol) {
				if _, again := h.Call(AppendHeader(nil, OpPing, 0, 0, 0)); !errors.Is(again, ErrProtocol) {
					t.Errorf("after a protocol error, a call gave %v, want the same ErrProtocol", again)
				}
			}
		})
	}
}

// TestFakeHelperHangs: a helper that stops answering is ErrTimeout, and
// is not asked again.
func TestFakeHelperHangs(t *testing.T) {
	old := callTimeout
	callTimeout = 100 * time.Millisecond
	defer func() { callTimeout = old }()
	stop := make(chan struct{})
	h := fakeHelper(t, helloMsg(Version), func(Header, []byte) []byte { <-stop; return nil })
	t.Cleanup(func() { close(stop) })
	if err := h.hello(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDevice(h, "rxe0", 1); !errors.Is(err, ErrTimeout) {
		t.Fatalf("OpenDevice on a hung helper: %v, want ErrTimeout", err)
	}
	if _, err := h.Call(AppendHeader(nil, OpPing, 0, 0, 0)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a call after the timeout: %v, want the same ErrTimeout", err)
	}
}

// TestStartHelperNoRDMACore: a host without libibverbs.so.1, where the
// dynamic loader stops the helper before main, gives ErrNoRDMACore with the
// packages to install.
func TestStartHelperNoRDMACore(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, HelperName)
	script := "#!/bin/sh\necho '" + HelperName + ": error while loading shared libraries: libibverbs.so.1: cannot open shared object file: No such file or directory' >&2\nexit 127\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := StartHelper(fake)
	if !errors.Is(err, ErrNoRDMACore) || !strings.Contains(err.Error(), "apt-get install libibverbs1") {
		t.Fatalf("StartHelper = %v, want ErrNoRDMACore naming the packages", err)
	}
	if _, err := HelperPath(filepath.Join(dir, "nothing"), nil); !errors.Is(err, ErrBuild) {
		t.Fatalf("HelperPath(missing) = %v, want ErrBuild", err)
	}
}

// TestPrebuiltHelperChecks: a prebuilt helper others could write, or one
// that is no regular file, is refused; the daemon's own is taken.
func TestPrebuiltHelperChecks(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, HelperName)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := HelperPath(p, nil); err != nil || got != p {
		t.Fatalf("HelperPath(own, 0755) = %q, %v", got, err)
	}
	if err := os.Chmod(p, 0o775); err != nil {
		t.Fatal(err)
	}
	if _, err := HelperPath(p, nil); !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "chmod go-w") {
		t.Fatalf("HelperPath(group-writable) = %v, want ErrBuild saying chmod go-w", err)
	}
	if _, err := HelperPath(dir, nil); !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("HelperPath(a directory) = %v, want ErrBuild", err)
	}
}
