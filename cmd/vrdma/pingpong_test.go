package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// hangGuard bounds how long a test waits for a pingpong end; the ends
// themselves have no timeout once their QPs are connected, as
// ibv_rc_pingpong has none.
const hangGuard = time.Minute

// result is how a command run in a goroutine ended.
type result struct {
	code     int
	out, err string
}

// goCmd runs the command line in a goroutine.
func goCmd(args ...string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		ch <- result{code, out.String(), errOut.String()}
	}()
	return ch
}

func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("%s did not finish within %v", what, hangGuard)
	}
	panic("unreachable")
}

// listenLoopback listens on a free port of 127.0.0.1 and returns it.
func listenLoopback(t *testing.T) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// startPPServer runs a pingpong server with args on a free port; it
// returns the port and the server's ending.
func startPPServer(t *testing.T, args ...string) (string, <-chan result) {
	t.Helper()
	cfg, err := parsePingpongArgs(args)
	if err != nil {
		t.Fatalf("server options %q: %v", args, err)
	}
	ln, port := listenLoopback(t)
	ch := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		err := pingpong(cfg, &out, ln)
		r := result{out: out.String()}
		if err != nil {
			r.code, r.err = 1, err.Error()
		}
		ch <- r
	}()
	return port, ch
}

var addrLine = regexp.MustCompile(`(?m)^  (local|remote) address: {1,2}LID 0x0000, QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6}), GID (\S+)$`)

// addresses returns the QPN/PSN/GID of the local and remote address lines.
func addresses(t *testing.T, out string) (local, remote string) {
	t.Helper()
	m := addrLine.FindAllStringSubmatch(out, -1)
	if len(m) != 2 || m[0][1] != "local" || m[1][1] != "remote" {
		t.Fatalf("want a local then a remote address line:\n%s", out)
	}
	return strings.Join(m[0][2:], " "), strings.Join(m[1][2:], " ")
}

func TestPingpongRunsLikeIbvRcPingpong(t *testing.T) {
	sock := daemontest.Start(t)
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := dev.GID(0)
	dev.Close()
	tests := []struct {
		name  string
		args  []string
		bytes int // what both ends must report moving
		iters int
	}{
		{"64 bytes", []string{"-g", "0", "-s", "64", "-n", "20"}, 64 * 20 * 2, 20},
		{"4096 bytes by default", []string{"-g", "0", "-n", "20"}, 4096 * 20 * 2, 20},
		{"checked, two pages, on CQ events", []string{"-g0", "-c", "-e", "-s", "8192", "-n", "10"}, 8192 * 10 * 2, 10},
		{"long options, three receives at a time", []string{"--gid-idx=0", "--size=64", "--iters", "30", "--mtu=4096", "--rx-depth=3"}, 64 * 30 * 2, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port, server := startPPServer(t, append([]string{"--socket", sock}, tt.args...)...)
			client := await(t, goCmd(append(append([]string{"pingpong", "--socket", sock, "-p", port}, tt.args...), "127.0.0.1")...), "the client")
			srv := await(t, server, "the server")
			if client.code != 0 || srv.code != 0 {
				t.Fatalf("client exit %d: %s%s\nserver exit %d: %s%s", client.code, client.out, client.err, srv.code, srv.out, srv.err)
			}
			cl, cr := addresses(t, client.out)
			sl, sr := addresses(t, srv.out)
			if cl != sr || cr != sl {
				t.Errorf("the ends disagree on who is who: client local %q remote %q, server local %q remote %q", cl, cr, sl, sr)
			}
			if want := " " + gidText(gid); !strings.HasSuffix(cl, want) {
				t.Errorf("client address %q does not end in the adapter's GID%s", cl, want)
			}
			for end, out := range map[string]string{"client": client.out, "server": srv.out} {
				for _, w := range []string{
					fmt.Sprintf(`(?m)^%d bytes in \d+\.\d\d seconds = \d+\.\d\d Mbit/sec$`, tt.bytes),
					fmt.Sprintf(`(?m)^%d iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter$`, tt.iters),
				} {
					if !regexp.MustCompile(w).MatchString(out) {
						t.Errorf("%s output lacks %q:\n%s", end, w, out)
					}
				}
				if strings.Contains(out, "invalid data") {
					t.Errorf("%s found bad data:\n%s", end, out)
				}
			}
		})
	}
}

// fakePPServer accepts one client and answers as act says.
func fakePPServer(t *testing.T, act func(net.Conn)) string {
	t.Helper()
	ln, port := listenLoopback(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		act(conn)
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return port
}

// message pads s with NULs to a 52-byte message.
func message(s string) []byte {
	b := make([]byte, ppMsgLen)
	copy(b, s)
	return b
}

func TestPingpongClientFacingANonPingpongServerFailsClearly(t *testing.T) {
	sock := daemontest.Start(t)
	// reply reads the client's address, answers msg and hangs up.
	reply := func(msg []byte) func(net.Conn) {
		return func(c net.Conn) {
			var b [ppMsgLen]byte
			if _, err := io.ReadFull(c, b[:]); err == nil {
				_, _ = c.Write(msg)
			}
		}
	}
	tests := []struct {
		name    string
		act     func(net.Conn)
		timeout time.Duration // of the exchange; 0: as shipped
		want    string
	}{
		{"garbage", reply(message("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")), 0, "is not a pingpong address"},
		{"closes at once", func(net.Conn) {}, 0, "closed the connection after 0 of the 52 bytes"},
		{"closes half way", reply([]byte("0000:000011:8f")), 0, "closed the connection after 14 of the 52 bytes"},
		{"no GID (ibv_rc_pingpong without -g)", reply(message("0000:000011:8f8085:00000000000000000000000000000000")), 0, "run both sides with -g"},
		{"silent", func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }, 100 * time.Millisecond, "sent 0 of the 52 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.timeout != 0 {
				defer func(d time.Duration) { oobTimeout = d }(oobTimeout)
				oobTimeout = tt.timeout
			}
			port := fakePPServer(t, tt.act)
			r := await(t, goCmd("pingpong", "--socket", sock, "-g", "0", "-p", port, "127.0.0.1"), "the client")
			if r.code != 1 || !strings.Contains(r.err, tt.want) {
				t.Fatalf("exit %d (want 1), stderr %q (want %q)", r.code, r.err, tt.want)
			}
		})
	}
}

func TestPingpongServerFacingANonPingpongClientFailsClearly(t *testing.T) {
	sock := daemontest.Start(t)
	tests := []struct {
		name string
		send []byte
		want string
	}{
		{"garbage", message("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "is not a pingpong address"},
		{"no done", message("0000:000011:8f8085:fe800000000000000000000000000001"), `couldn't recv "done"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port, server := startPPServer(t, "--socket", sock, "-g", "0")
			conn, err := net.Dial("tcp", "127.0.0.1:"+port)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			var reply [ppMsgLen]byte
			_, _ = io.ReadFull(conn, reply[:]) // the server's address, if it got that far
			conn.Close()
			r := await(t, server, "the server")
			if r.code == 0 || !strings.Contains(r.err, tt.want) {
				t.Fatalf("server ended with %q, want an error with %q", r.err, tt.want)
			}
		})
	}
}

func TestPingpongOptionsAsGetoptLong(t *testing.T) {
	good := []struct {
		args  []string
		check func(*ppConfig) bool
	}{
		{[]string{"-s", "64"}, func(c *ppConfig) bool { return c.size == 64 && c.host == "" }},
		{[]string{"-s64"}, func(c *ppConfig) bool { return c.size == 64 }},
		{[]string{"--size=64"}, func(c *ppConfig) bool { return c.size == 64 }},
		{[]string{"--size", "64"}, func(c *ppConfig) bool { return c.size == 64 }},
		{[]string{"--si=64"}, func(c *ppConfig) bool { return c.size == 64 }},
		{[]string{"-s", "0x40"}, func(c *ppConfig) bool { return c.size == 64 }},
		{[]string{"-ecs64", "peer"}, func(c *ppConfig) bool { return c.events && c.check && c.size == 64 && c.host == "peer" }},
		{[]string{"peer", "-n", "5", "-g", "1"}, func(c *ppConfig) bool { return c.host == "peer" && c.iters == 5 && c.gidIdx == 1 }},
		{[]string{"-m", "2048", "-r", "8", "-l", "3", "-i", "1", "-p", "1"}, func(c *ppConfig) bool {
			return c.mtu == ibv.MTU2048 && c.rxDepth == 8 && c.sl == 3 && c.ibPort == 1 && c.port == 1
		}},
		{[]string{"-d", "vrdma1", "--socket=/s", "--instance", "x", "-N"}, func(c *ppConfig) bool {
			return c.dev == "vrdma1" && c.vopts.Socket == "/s" && c.vopts.Instance == "x"
		}},
		{[]string{"--", "-peer"}, func(c *ppConfig) bool { return c.host == "-peer" }},
		{nil, func(c *ppConfig) bool {
			return c.port == 18515 && c.ibPort == 1 && c.size == 4096 && c.mtu == ibv.MTU1024 && c.rxDepth == 500 &&
				c.iters == 1000 && c.sl == 0 && c.gidIdx == -1 && !c.events && !c.check && c.dev == ""
		}},
	}
	for _, tt := range good {
		cfg, err := parsePingpongArgs(tt.args)
		if err != nil || !tt.check(cfg) {
			t.Errorf("%q: %+v, %v", tt.args, cfg, err)
		}
	}
	bad := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-m", "1000"}, 2, "the path MTU is 256, 512, 1024, 2048 or 4096"},
		{[]string{"--mtu=big"}, 2, "the path MTU is"},
		{[]string{"-s", "0"}, 2, `-s "0": want a number from 1`},
		{[]string{"--size=12k"}, 2, `--size "12k": want a number`},
		{[]string{"-p", "65536"}, 2, "-p"},
		{[]string{"-i", "0"}, 2, "-i"},
		{[]string{"-l", "16"}, 2, "-l"},
		{[]string{"-n", "0"}, 2, "-n"},
		{[]string{"-x"}, 2, "invalid option -- 'x'"},
		{[]string{"--frob"}, 2, "unrecognized option '--frob'"},
		{[]string{"--s=5"}, 2, "option '--s' is ambiguous"},
		{[]string{"-s"}, 2, "option requires an argument -- 's'"},
		{[]string{"--iters"}, 2, "option '--iters' requires an argument"},
		{[]string{"--events=yes"}, 2, "option '--events' doesn't allow an argument"},
		{[]string{"a", "b"}, 2, "one HOST at most"},
		{[]string{"-o"}, 1, "on-demand paging (-o/--odp, -O/--iodp) is not supported"},
		{[]string{"--iodp"}, 1, "is not supported"},
		{[]string{"-P"}, 1, "prefetch (-P/--prefetch) is valid only with an on-demand memory region"},
		{[]string{"-t"}, 1, "completion timestamps (-t/--ts) are not supported"},
		{[]string{"--dm"}, 1, "device memory (-j/--dm) is not supported"},
	}
	for _, tt := range bad {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errs := vrdmaCmd(t, append([]string{"pingpong"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tt.code, errs, tt.want)
			}
		})
	}
	if code, out, _ := vrdmaCmd(t, "pingpong", "--help"); code != 0 || !strings.Contains(out, "-s, --size=<size>") {
		t.Errorf("--help: exit %d, output %q", code, out)
	}
}

func TestPingpongMessageIsTheCapturedOne(t *testing.T) {
	// From /work/shared/interop/captures/rc_pingpong*.dissect.txt (the TCP
	// payloads) and rc_pingpong*.txt (how ibv_rc_pingpong printed them).
	tests := []struct {
		wire    string
		qpn     uint32
		psn     uint32
		printed string
	}{
		{"0000:000011:8f8085:00000000000000000000ffff0a2f5b01", 0x11, 0x8f8085, "::ffff:10.47.91.1"},
		{"0000:000011:0e1afd:00000000000000000000ffff0a2f5b02", 0x11, 0x0e1afd, "::ffff:10.47.91.2"},
		{"0000:000015:d7974a:fe80000000000000505400fffe479101", 0x15, 0xd7974a, "fe80::5054:ff:fe47:9101"},
	}
	for _, tt := range tests {
		wire := tt.wire + "\x00"
		e, err := parsePPMsg([]byte(wire))
		if err != nil {
			t.Fatalf("%q: %v", wire, err)
		}
		if e.LID != 0 || e.QPN != tt.qpn || e.PSN != tt.psn || gidText(e.GID) != tt.printed {
			t.Errorf("%q parsed as LID %d QPN %#x PSN %#x GID %s", wire, e.LID, e.QPN, e.PSN, gidText(e.GID))
		}
		b, err := encodePPMsg(e)
		if err != nil || string(b[:]) != wire {
			t.Errorf("%+v encoded as %q (%v), want %q", e, b, err, wire)
		}
	}
	if _, err := encodePPMsg(vrdma.Endpoint{QPN: 1 << 24}); err == nil {
		t.Error("a 25-bit QPN was encoded")
	}
	for _, bad := range []string{
		"0000:000011:8f8085:00000000000000000000ffff0a2f5b01",         // 51 bytes: no NUL
		"0000:000011:8f8085:00000000000000000000ffff0a2f5b01\x00\x00", // 53 bytes
		"0000:000011:8f8085:00000000000000000000ffff0a2f5b0g\x00",     // not hex
		"000:0000011:8f8085:00000000000000000000ffff0a2f5b01\x00",     // field widths
		"0000:000011:8f8085:0000000000000000000:ffff0a2f5b01\x00",     // five fields
		"0000 000011 8f8085 00000000000000000000ffff0a2f5b01\x00",
		"0000:000011:8f8085:00000000000000000000ffff0a2f\x00\x00\x00\x00\x00",
	} {
		if e, err := parsePPMsg([]byte(bad)); err == nil {
			t.Errorf("%q parsed as %+v", bad, e)
		}
	}
}

func TestGIDTextIsInetNtop(t *testing.T) {
	tests := []struct{ in, want string }{
		{"::", "::"},
		{"::1", "::1"},
		{"::ffff:10.47.91.1", "::ffff:10.47.91.1"},
		{"::10.47.91.1", "::10.47.91.1"}, // glibc keeps the IPv4-compatible form
		{"::ffff:0:0", "::ffff:0.0.0.0"},
		{"fe80::5054:ff:fe47:9101", "fe80::5054:ff:fe47:9101"},
		{"fe80:0:0:0:0:0:0:0", "fe80::"},
		{"2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"},
		{"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"}, // the first of two equal runs
		{"1:0:2:0:3:0:4:0", "1:0:2:0:3:0:4:0"},        // single zero groups stay
		{"1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"},
	}
	for _, tt := range tests {
		g, err := vrdma.ParseGID(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := gidText(g); got != tt.want {
			t.Errorf("%s printed as %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestChkFindsPagesTheClientDidNotMark(t *testing.T) {
	buf := bytes.Repeat([]byte{0x7b}, 3*pageSize)
	if got := badPages(buf); len(got) != 3 {
		t.Errorf("an unreceived buffer has bad pages %v, want all 3", got)
	}
	markPages(buf)
	if got := badPages(buf); len(got) != 0 {
		t.Errorf("a marked buffer has bad pages %v", got)
	}
	buf[pageSize] = 1
	if got := badPages(buf); len(got) != 1 || got[0] != 1 {
		t.Errorf("bad pages %v, want [1]", got)
	}
}
