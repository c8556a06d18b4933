package stacks

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/internal/proctest"
)

// Datagram rsockets between namespace hosts: Debian's udpong
// (rdmacm-utils), unmodified, its server on a and its client on b. The
// client's first datagram crosses the veth over UDP and names its UD QP;
// the server answers with its own, and every datagram after that goes
// between the hosts' UD QPs on the link mode's path.

func init() {
	betweenHosts = append(betweenHosts, struct {
		name string
		run  func(t *testing.T, a, b *host, mode linkMode)
	}{"udpong", func(t *testing.T, a, b *host, mode linkMode) {
		requireUdpong(t)
		for _, c := range udpongCases {
			t.Run(c.name, func(t *testing.T) { runUdpong(t, a, b, c, mode.path) })
		}
	}})
}

// requireUdpong skips the test unless udpong is on the PATH.
func requireUdpong(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("udpong"); err != nil {
		t.Skip("udpong not installed: apt-get install rdmacm-utils")
	}
}

// udpongCase is one run of udpong.
type udpongCase struct {
	name string
	args []string
	want string // the client's report line: "name bytes xfers "
}

// udpongCases are udpong's runs: the echo test (every datagram comes back)
// and the one-way test (the server counts what arrived; datagrams may be
// dropped, so only the report is asked for). The echo tests make 100
// exchanges: udpong resends after 1 ms without an answer and again for
// every late answer, so on a loaded machine copies pile up to what the
// receive queue holds and each exchange waits behind them
// (internal/guest's TestToolUdpong says more); 300 took over 90 s in CI.
var udpongCases = []udpongCase{
	{"echo 100 B", []string{"-T", "e", "-S", "100", "-C", "100"}, "custom    100     200 "},
	{"echo 1 KiB", []string{"-T", "e", "-S", "1024", "-C", "100"}, "custom    1k      200 "},
	{"echo rpoll 1.5 KiB", []string{"-T", "e", "-T", "a", "-S", "1536", "-C", "100"}, "custom    1.5k    200 "},
	{"one way 1.9 KiB", []string{"-S", "2000", "-C", "1000"}, "custom    1.9k    "},
}

var udpongPort = 17174

// runUdpong runs case c's udpong server on srv and its client on cli and
// checks the client's report and that the datagrams took path.
func runUdpong(t *testing.T, srv, cli *host, c udpongCase, path string) {
	t.Helper()
	udpongPort++
	port := udpongPort
	addr := srv.ns.IPv4.String()
	bs, bc := srv.paths(t), cli.paths(t)
	args := append([]string{"-p", strconv.Itoa(port)}, c.args...)
	debug := []string{"VRDMA_DEBUG=1"}
	server := srv.start(t, debug, "udpong", append([]string{"-b", addr}, args...)...)
	bctx, bcancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	bound := proctest.WaitUDPBound(bctx, server.cmd.Process.Pid, port)
	bcancel()
	if !bound {
		t.Fatalf("udpong's server on %s is not bound to UDP port %d after 30 s; it printed:\n%s", srv.name, port, server.out.String())
	}
	out, ok := cli.run(t, debug, "udpong", append([]string{"-s", addr}, args...)...)
	_ = server.cmd.Process.Kill() // it serves for ever
	<-server.done
	if !ok {
		t.Logf("udpong's server on %s printed:\n%s", srv.name, server.out.String())
		return
	}
	if !strings.Contains(out, "\n"+c.want) {
		t.Errorf("udpong's client on %s (%s) did not report %q; it printed:\n%s", cli.name, c.name, c.want, out)
	}
	tookPath(t, srv, bs, path)
	tookPath(t, cli, bc, path)
}

// TestRsocketKeepaliveBetweenHosts: a stream rsocket on a, with
// SO_KEEPALIVE and TCP_KEEPIDLE 1 s, waits in rrecv on a peer on b that
// then vanishes without a word: b's link drops every RoCEv2 datagram (so
// neither the close nor anything else of b's arrives) and the peer's
// process is killed. The survivor's keepalive probe (a 0-byte RDMA WRITE)
// is never acknowledged, its retries run out, and rrecv must fail
// (ETIMEDOUT) within a generous deadline; without probes it waits for
// ever. testdata/rsocket_keepalive.c is both ends; needs gcc and
// librdmacm-dev.
func TestRsocketKeepaliveBetweenHosts(t *testing.T) {
	netns.Require(t)
	bin := filepath.Join(t.TempDir(), "rsocket_keepalive")
	if out, err := exec.Command("gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", bin,
		filepath.Join("testdata", "rsocket_keepalive.c"), "-lrdmacm").CombinedOutput(); err != nil {
		t.Skipf("building rsocket_keepalive.c (gcc, librdmacm-dev?): %v\n%s", err, out)
	}
	lib := guesttest.Library(t)
	a, b := twoHosts(t, lib, true, "rdma")
	port := strconv.Itoa(udpongPort + 100)
	debug := []string{"VRDMA_DEBUG=1"}
	srv := a.start(t, debug, bin, "server", port)
	var cli *proc
	for cli == nil || !strings.Contains(cli.out.String(), "connected") {
		if cli != nil {
			<-cli.done // refused: a's server does not listen yet
			time.Sleep(100 * time.Millisecond)
		}
		select {
		case <-srv.done:
			t.Fatalf("the server ended before its client connected:\n%s", srv.out.String())
		default:
		}
		cli = b.start(t, debug, bin, "client", a.ns.IPv4.String(), port)
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(cli.out.String(), "connected") && time.Now().Before(deadline) && !isDone(cli) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	for !strings.Contains(srv.out.String(), "ready") && !isDone(srv) {
		time.Sleep(20 * time.Millisecond)
	}
	b.ns.SetLoss(t, 100)
	_ = cli.cmd.Process.Kill()
	<-cli.done
	out, ok := srv.wait(t, a.name) // runTimeout is the deadline
	if ok && !strings.Contains(out, "rrecv: -1 (Connection timed out)") {
		t.Errorf("the survivor's rrecv did not time out; it printed:\n%s", out)
	}
}

// isDone reports whether p has ended.
func isDone(p *proc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
