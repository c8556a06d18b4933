package stacks

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
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
// dropped, so only the report is asked for).
var udpongCases = []udpongCase{
	{"echo 100 B", []string{"-T", "e", "-S", "100", "-C", "500"}, "custom    100     1k "},
	{"echo 1 KiB", []string{"-T", "e", "-S", "1024", "-C", "500"}, "custom    1k      1k "},
	{"echo rpoll 1.5 KiB", []string{"-T", "e", "-T", "a", "-S", "1536", "-C", "300"}, "custom    1.5k    600 "},
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
