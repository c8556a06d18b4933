package guest

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/proctest"
)

// Debian's librspreload.so (librdmacm1), which turns a program's sockets
// into rsockets, loaded into unmodified programs beside the drop-in
// librdmacm.so.1 it calls.

// rspreload returns the path of Debian's librspreload.so, or skips the test.
func rspreload(t *testing.T) string {
	t.Helper()
	paths, _ := filepath.Glob("/usr/lib/*/rsocket/librspreload.so*")
	if len(paths) == 0 {
		t.Skip("librspreload.so is not installed: `apt-get install librdmacm1` (Debian, Ubuntu) to run this test")
	}
	return paths[0]
}

// TestToolRspreloadIperf3 runs iperf3's server and client under
// librspreload: their TCP sockets become stream rsockets on vrdma (the
// server listens through the daemon's connection manager, which the
// library's debug line shows). iperf3 waits in select(), which librspreload
// hands to rpoll for every descriptor, rsockets and ordinary ones alike:
// before rsockets, rpoll failed with ENOSYS ("select failed: Function not
// implemented").
func TestToolRspreloadIperf3(t *testing.T) {
	requireTool(t, "iperf3", "iperf3")
	h := newToolHost(t)
	h.preload = rspreload(t)
	port := strconv.Itoa(freePort(t))
	srv := h.start(t, "", "iperf3", "-s", "-1", "-p", port)
	refused := func(out string) bool { return strings.Contains(out, "Connection refused") } // not listening yet
	out := h.runCMClient(t, srv, refused, "iperf3", "-c", "127.0.0.1", "-p", port, "-n", "4M")
	sout := srv.wait(t)
	// The client counts what it sent; the server's count may stop short
	// (iperf3 -n ends the test once the sender is done, also without
	// librspreload), so of the server only its report is asked for.
	if strings.Contains(out, "error") || !strings.Contains(out, "iperf Done.") || !strings.Contains(out, "4.00 MBytes") {
		t.Errorf("iperf3's client under librspreload did not send 4 MBytes; it printed:\n%s", out)
	}
	if strings.Contains(sout, "error") || !strings.Contains(sout, "receiver") {
		t.Errorf("iperf3's server under librspreload did not report the test; it printed:\n%s", sout)
	}
	if !strings.Contains(sout, "rdma_cm: listening on port "+port) {
		t.Errorf("iperf3's server did not listen on an rsocket (no rdma_cm listen line); it printed:\n%s", sout)
	}
}

// TestToolRstream runs Debian's rstream (rdmacm-utils), unmodified, server
// and client on stream rsockets over vrdma, with its data check (-T v) in
// each of its modes: blocking calls, nonblocking calls, and rpoll before
// each call; small messages many times and large ones (more than the
// receive buffer, so credits and buffer updates go round).
func TestToolRstream(t *testing.T) {
	requireTool(t, "rstream", rdmacmUtils)
	h := newToolHost(t)
	// rstream's default run is its whole table of sizes: 29.5 s of the
	// usual 30 s guard on a loaded machine (-race daemon), and over it in CI.
	h.timeout = 2 * time.Minute
	tests := []struct {
		name string
		args []string
		want []string // the report lines that must be there: "name bytes xfers"
	}{
		{"blocking", []string{"-T", "b", "-S", "1048576", "-C", "50"}, []string{"custom    1m      50 "}},
		{"nonblocking", []string{"-T", "n", "-S", "65536", "-C", "200"}, []string{"custom    64k     200 "}},
		{"async", []string{"-T", "a", "-S", "64", "-C", "2000"}, []string{"custom    64      2k "}},
		{"default sizes", nil, []string{"64_lat ", "1m_lat ", "64_bw ", "1m_bw "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := strconv.Itoa(freePort(t))
			args := append([]string{"-p", port, "-T", "v"}, tt.args...)
			srv := h.startCMServer(t, "rstream", append([]string{"-b", "127.0.0.1"}, args...)...)
			out := h.runCMClient(t, srv, refusedNoListener, "rstream", append([]string{"-s", "127.0.0.1"}, args...)...)
			sout := srv.wait(t)
			for _, o := range []struct{ who, out string }{{"client", out}, {"server", sout}} {
				if strings.Contains(o.out, "failed") { // "data verification failed byte N" among others
					t.Errorf("rstream %s %s failed; it printed:\n%s", o.who, tt.name, o.out)
				}
				for _, w := range tt.want {
					if !strings.Contains(o.out, "\n"+w) {
						t.Errorf("rstream %s %s did not report %q; it printed:\n%s", o.who, tt.name, w, o.out)
					}
				}
			}
		})
	}
}

// TestToolRiostream runs Debian's riostream (rdmacm-utils), unmodified:
// each side riomaps its buffer, the other riowrites into it (RDMA WRITE
// straight into the peer's memory, which riostream watches for its last
// byte), with the data check (-T v), in its blocking, nonblocking and
// rpoll modes.
func TestToolRiostream(t *testing.T) {
	requireTool(t, "riostream", rdmacmUtils)
	h := newToolHost(t)
	tests := []struct {
		name string
		args []string
		want string // the report line: "name bytes xfers "
	}{
		{"blocking 1 MiB", []string{"-S", "1048576", "-C", "10"}, "custom    1m      10 "},
		{"nonblocking 4 KiB", []string{"-T", "n", "-S", "4096", "-C", "100"}, "custom    4k      100 "},
		{"rpoll 64 B", []string{"-T", "a", "-S", "64", "-C", "1000"}, "custom    64      1k "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := strconv.Itoa(freePort(t))
			args := append([]string{"-p", port, "-T", "v"}, tt.args...)
			srv := h.startCMServer(t, "riostream", append([]string{"-b", "127.0.0.1"}, args...)...)
			out := h.runCMClient(t, srv, refusedNoListener, "riostream", append([]string{"-s", "127.0.0.1"}, args...)...)
			sout := srv.wait(t)
			for _, o := range []struct{ who, out string }{{"client", out}, {"server", sout}} {
				if strings.Contains(o.out, "failed") || !strings.Contains(o.out, "\n"+tt.want) {
					t.Errorf("riostream %s %s did not report %q with its data checked; it printed:\n%s", o.who, tt.name, tt.want, o.out)
				}
			}
		})
	}
}

// TestToolUdpong runs Debian's udpong (rdmacm-utils), unmodified, server
// and client on datagram rsockets over vrdma: the client's first datagram
// goes over UDP and teaches each side the other's UD QP, the rest go over
// the UD QPs. Its echo test (-T e) has the server send every datagram
// back; its blocking (-T b), nonblocking (the default) and rpoll (-T a)
// modes; and its one-way test, where the server counts what arrived
// (datagrams may be dropped, so only the report is asked for). The server
// never ends on its own; it is killed after the client (its stdout, a
// pipe, is lost then: the client's report shows both sides worked).
// Before datagram rsockets, rsocket(SOCK_DGRAM) failed with ENOSYS.
//
// udpong's echo client sends a datagram again when no answer came within
// 1 ms, and again for every answer to an earlier copy. When the round trip
// exceeds 1 ms (the daemon built with -race on two loaded cores), copies
// pile up to what the server's receive queue holds (384) and stay: UD drops
// the rest, and every stale answer sends one more. The run still ends, but
// each exchange then waits behind hundreds of copies; 500 exchanges took
// over 30 s in 1 of about 15 loaded runs (hundreds of thousands of
// datagrams, counted in the daemon's CQs; no completion or wake-up lost).
// So the echo tests make 100 exchanges and the hang guard is 2 minutes.
func TestToolUdpong(t *testing.T) {
	requireTool(t, "udpong", rdmacmUtils)
	h := newToolHost(t)
	h.timeout = 2 * time.Minute
	tests := []struct {
		name string
		args []string
		want []string // the report lines: "name bytes xfers "
	}{
		{"echo blocking", []string{"-T", "e", "-T", "b", "-S", "1024", "-C", "100"}, []string{"custom    1k      200 "}},
		{"echo nonblocking", []string{"-T", "e", "-S", "100", "-C", "100"}, []string{"custom    100     200 "}},
		{"echo rpoll", []string{"-T", "e", "-T", "a", "-S", "1536", "-C", "100"}, []string{"custom    1.5k    200 "}},
		{"one way", []string{"-S", "2000", "-C", "2000"}, []string{"custom    1.9k    "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			portN := freePort(t)
			port := strconv.Itoa(portN)
			args := append([]string{"-p", port}, tt.args...)
			srv := h.start(t, "", "udpong", append([]string{"-b", "127.0.0.1"}, args...)...)
			bctx, bcancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard for the bind
			bound := proctest.WaitUDPBound(bctx, srv.cmd.Process.Pid, portN)
			bcancel()
			if !bound {
				t.Fatalf("udpong's server is not bound to UDP port %s after 30 s; it printed:\n%s", port, srv.out.String())
			}
			cli := h.start(t, "", "udpong", append([]string{"-s", "127.0.0.1"}, args...)...)
			out := cli.wait(t)
			for _, w := range tt.want {
				if !strings.Contains(out, "\n"+w) {
					t.Errorf("udpong's client (%s) did not report %q; it printed:\n%s", tt.name, w, out)
				}
			}
			_ = srv.kill()
			<-srv.done
		})
	}
}
