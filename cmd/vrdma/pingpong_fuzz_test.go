package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// A pingpong server trades addresses with whoever connects to its port
// first, and connects its QP to the address it is given: the client's
// bytes are untrusted input. FuzzPingpongServer runs the whole server
// (pingpong with a listener) against a real daemon, a client sending the
// fuzzer's bytes, and checks that whatever they are the server does not
// panic, ends, says what went wrong in printable text, and releases every
// verbs object and goroutine it made.

// ppRig is a daemon, an admin connection that counts its objects, and a
// client's QP in INIT that valid seeds give the server as their address.
type ppRig struct {
	adm    *vrdma.Admin
	sock   string
	client vrdma.Endpoint
}

func newPPRig(tb testing.TB) *ppRig {
	tb.Helper()
	sock := daemontest.Start(tb)
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { adm.Close() })
	cfg, err := parsePingpongArgs([]string{"--socket", sock, "-g", "0", "-s", "64", "-r", "2", "-n", "1"})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := openPPSide(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.close() })
	gid, err := s.dev.GID(0)
	if err != nil {
		tb.Fatal(err)
	}
	// The rig holds two sessions, the admin's and the client side's.
	daemontest.AwaitSessions(tb, func() (int, error) { st, err := adm.Stats(); return st.Sessions, err }, 2, 10*time.Second)
	return &ppRig{adm: adm, sock: sock, client: vrdma.Endpoint{QPN: s.qp.QPN(), PSN: s.psn, GID: gid}}
}

// shortBounds makes the exchange's and the loop's bounds short for the
// rest of the test, so that an input whose client goes quiet costs little.
func shortBounds(tb testing.TB) {
	oob, idle := oobTimeout, ppIdleTimeout
	tb.Cleanup(func() { oobTimeout, ppIdleTimeout = oob, idle })
	oobTimeout, ppIdleTimeout = 200*time.Millisecond, 20*time.Millisecond
}

func FuzzPingpongServer(f *testing.F) {
	r := newPPRig(f)
	shortBounds(f)
	addr, err := encodePPMsg(r.client)
	if err != nil {
		f.Fatal(err)
	}
	valid := string(addr[:])
	for _, s := range []string{
		valid + ppDone,
		valid,
		valid + "DONE\x00",
		valid + ppDone + "and more",
		valid[:20],
		"0000:000011:8f8085:00000000000000000000000000000000\x00" + ppDone, // ibv_rc_pingpong without -g
		"0000:ffffff:000000:ff020000000000000000000000000001\x00" + ppDone, // multicast
		"0000:000001:000000:00000000000000000000ffff7f000001\x00" + ppDone, // the GSI QP at 127.0.0.1
		"0000:000000:ffffff:fe800000000000000000000000000001\x00" + ppDone,
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("x", 64),
		"",
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(valid), true) // a client that leaves before reading the server's address
	f.Fuzz(func(t *testing.T, stream []byte, hangup bool) {
		err := r.serveOne(t, func(vrdma.Endpoint) []byte { return stream }, hangup)
		if err == nil {
			t.Fatalf("the server ran to its end with a client that sent only %q", stream)
		}
	})
}

// serveOne runs a pingpong server for one client, which sends what say
// makes of the server's address and then closes the connection (hangup) or
// its sending half, reading what the server says. It returns how the server ended, once it has
// checked that its error is printable text and that it released what it
// made.
func (r *ppRig) serveOne(t *testing.T, say func(server vrdma.Endpoint) []byte, hangup bool) error {
	t.Helper()
	before, err := r.adm.Stats()
	if err != nil {
		t.Fatal(err)
	}
	goroutines := runtime.NumGoroutine()
	cfg, err := parsePingpongArgs([]string{"--socket", r.sock, "-g", "0", "-s", "64", "-r", "2", "-n", "2"})
	if err != nil {
		t.Fatal(err)
	}
	ln, port := listenLoopback(t)
	out, w := io.Pipe()
	ended := make(chan error, 1)
	go func() {
		err := pingpong(cfg, w, ln)
		w.Close()
		ended <- err
	}()
	lines := bufio.NewReader(out)
	first, err := lines.ReadString('\n')
	if err != nil {
		t.Fatalf("the server's local address: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, lines) }()
	server := parseAddrLine(t, first)
	conn, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(hangGuard))
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	stream := say(server)
	_, _ = conn.Write(stream)
	if hangup {
		conn.Close()
	} else {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	select {
	case err = <-ended:
	case <-time.After(hangGuard):
		daemontest.DumpGoroutines(t)
		t.Fatalf("the server has not ended %v after its client sent %q", hangGuard, stream)
	}
	if err != nil {
		if i := strings.IndexFunc(err.Error(), func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
			t.Fatalf("the server's error has %q at byte %d: %q", err.Error()[i:], i, err)
		}
	}
	r.released(t, before, goroutines)
	return err
}

// parseAddrLine reads a pingpong's "local address" line.
func parseAddrLine(t *testing.T, line string) vrdma.Endpoint {
	t.Helper()
	m := addrLine.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
	if m == nil || m[1] != "local" {
		t.Fatalf("%q is not a local address line", line)
	}
	qpn, err1 := strconv.ParseUint(m[2], 16, 24)
	psn, err2 := strconv.ParseUint(m[3], 16, 24)
	gid, err3 := netip.ParseAddr(m[4])
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return vrdma.Endpoint{QPN: uint32(qpn), PSN: uint32(psn), GID: gid.As16()}
}

// released waits until the daemon holds what it held before and the
// goroutines are as many as before.
func (r *ppRig) released(t *testing.T, before vrdma.DaemonStats, goroutines int) {
	t.Helper()
	daemontest.AwaitReleased(t, r.adm.Stats, before, goroutines, hangGuard)
}
