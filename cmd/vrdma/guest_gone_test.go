package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/proctest"
)

// Debian's programs, unmodified, under `vrdma run` against a daemon that
// is SIGKILLed under them: each must end with a non-zero status within a
// few seconds (docs/design/lost-daemon.md), not spin on an empty CQ, not
// sleep for ever, and not run to its timer to report success with nothing
// done.

// goneDeadline bounds how long a program may take to end after its daemon
// died: a hang guard, not a measurement (they end in well under a second).
// It is shorter than the programs' own timers (-D 30, -t 30), so a program
// that runs to its timer fails too.
const goneDeadline = 20 * time.Second

// goneCase is one program pair: the server's and the client's arguments
// ("PORT" stands for a free TCP port), what the client prints once it
// transfers ("" when it prints nothing until the end: then it is given a
// moment), and whether the server must end too (qperf's serves on).
type goneCase struct {
	name, program, pkg string
	server, client     []string
	ready              string
	serverEnds         bool
}

func TestDebianToolsStopWhenTheDaemonDies(t *testing.T) {
	if _, err := exec.LookPath("stdbuf"); err != nil {
		t.Skip("stdbuf is missing: apt-get install coreutils")
	}
	lib := guesttest.Library(t)
	perftest := []string{"-d", "vrdma0", "-x", "0", "-p", "PORT", "-F", "-D", "30"}
	pingpong := []string{"-g", "0", "-p", "PORT", "-n", "1000000000"}
	for _, c := range []goneCase{
		{"ibv_rc_pingpong", "ibv_rc_pingpong", "ibverbs-utils", pingpong, append(pingpong, "127.0.0.1"), "remote address", true},
		{"ibv_rc_pingpong -e", "ibv_rc_pingpong", "ibverbs-utils", append(pingpong, "-e"), append(pingpong, "-e", "127.0.0.1"), "remote address", true},
		{"ib_write_bw -D 30", "ib_write_bw", "perftest", perftest, append(perftest, "127.0.0.1"), "#bytes", true},
		{"ib_send_lat -D 30", "ib_send_lat", "perftest", perftest, append(perftest, "127.0.0.1"), "#bytes", true},
		{"qperf rc_bw", "qperf", "qperf", []string{"-lp", "PORT"}, []string{"-lp", "PORT", "-t", "30", "127.0.0.1", "rc_bw"}, "", false},
		{"rping", "rping", "rdmacm-utils", []string{"-s", "-a", "127.0.0.1", "-p", "PORT"}, []string{"-c", "-a", "127.0.0.1", "-p", "PORT", "-v"}, "ping data", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := exec.LookPath(c.program); err != nil {
				t.Skipf("%s is not installed: apt-get install %s", c.program, c.pkg)
			}
			d, sock := startDaemonProc(t)
			server, client := startGonePair(t, lib, sock, c)
			time.Sleep(300 * time.Millisecond) // into its transfer; it must stop wherever it is
			d.Kill()
			ends := []*vrdmaProc{client}
			if c.serverEnds {
				ends = append(ends, server)
			}
			for _, p := range ends {
				code := p.AwaitExit(t, goneDeadline)
				if code == 0 {
					t.Errorf("%s exited 0 after its daemon died; want a non-zero status. It printed:\n%s", p.name, p.Output())
					continue
				}
				t.Logf("%s exited %d: %s", p.name, code, lastLines(p.Output(), 3))
			}
		})
	}
}

// startRun runs `vrdma run --socket sock -- program args...` with lib as
// the guest library, the program's output line-buffered (stdbuf): what it
// prints reaches the test as it prints it, not when it exits.
func startRun(t *testing.T, lib, sock, name, program string, args ...string) *vrdmaProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"run", "--socket", sock, "--", "stdbuf", "-oL", "-eL", program}, args...)...)
	cmd.Env = append(os.Environ(), cliEnv+"=1", guestLibEnv+"="+lib, "LC_ALL=C")
	return &vrdmaProc{Proc: proctest.Start(t, cmd), name: name}
}

// startGonePair starts c's server and a client connected to it that
// transfers. A port picked free may be taken by the time the server
// listens, and a client may come before the server listens: either is
// tried again.
func startGonePair(t *testing.T, lib, sock string, c goneCase) (server, client *vrdmaProc) {
	t.Helper()
	subst := func(args []string, port string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = strings.ReplaceAll(a, "PORT", port)
		}
		return out
	}
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		port := freePort(t)
		server = startRun(t, lib, sock, "the "+c.program+" server", c.program, subst(c.server, port)...)
		for time.Now().Before(deadline) && server.Running() {
			time.Sleep(200 * time.Millisecond) // a moment to listen
			client = startRun(t, lib, sock, "the "+c.program+" client", c.program, subst(c.client, port)...)
			if c.ready == "" {
				time.Sleep(2 * time.Second) // connected and into its test, most likely
				if client.Running() {
					return server, client
				}
				continue
			}
			if client.printed(t, c.ready) {
				if !client.Running() {
					t.Fatalf("%s ended before its daemon died: %s", client.name, client.Output())
				}
				return server, client
			}
		}
		server.Kill()
	}
	t.Fatalf("no %s client connected to a server in %v", c.program, hangGuard)
	return nil, nil
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
