package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/proctest"
)

// The tools against a daemon that is SIGKILLed under them: each must stop
// with a message that says the daemon went away and a non-zero exit, not
// spin. The test binary runs itself as vrdma (cliEnv), so the daemon and
// the tools are real processes of their own.

// goneMessage is what a tool must say when its daemon died.
const goneMessage = "the vrdma daemon went away"

// vrdmaProc is a vrdma command running as a process of its own.
type vrdmaProc struct {
	*proctest.Proc
	name string
}

// startVrdma runs `vrdma args...` as a process; the test kills it at its
// end if it still runs.
func startVrdma(t *testing.T, name string, args ...string) *vrdmaProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	return &vrdmaProc{Proc: proctest.Start(t, cmd), name: name}
}

// awaitOutput waits until the process's stdout holds want.
func (p *vrdmaProc) awaitOutput(t *testing.T, want string) {
	t.Helper()
	p.AwaitOutput(t, want, hangGuard)
}

// expectGone checks that p stopped with a non-zero exit and said why.
func (p *vrdmaProc) expectGone(t *testing.T, within time.Duration) {
	t.Helper()
	code := p.AwaitExit(t, within)
	if code == 0 || !strings.Contains(p.Err.String(), goneMessage) {
		t.Fatalf("%s exited %d with stderr %q; want a non-zero exit that says %q", p.name, code, p.Err.String(), goneMessage)
	}
	t.Logf("%s: %s", p.name, strings.TrimSpace(p.Err.String()))
}

// startDaemonProc runs `vrdma daemon` on a socket of its own.
func startDaemonProc(t *testing.T) (*vrdmaProc, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "vrdma-gone-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "vrdma.sock")
	// --lid-routing: qperf (without -cm1) names the port by LID alone.
	d := startVrdma(t, "the daemon", "daemon", "--socket", sock, "--state-dir", "", "--no-switch", "--lid-routing")
	d.awaitOutput(t, "serving")
	return d, sock
}

// awaitInstance waits until the daemon at sock has an instance whose name
// starts with prefix.
func awaitInstance(t *testing.T, sock, prefix string) {
	t.Helper()
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	deadline := time.Now().Add(hangGuard)
	for {
		insts, err := adm.Instances()
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range insts {
			if strings.HasPrefix(in.Name, prefix) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no instance %s* on the daemon", prefix)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPerfStopsWhenTheDaemonDies: `vrdma perf --loopback` with a minute
// to run, its daemon SIGKILLed a moment after its tests start: it exits
// non-zero with the reason long before its minute is up, in every kind of
// loop the tests run (a SEND stream, a ping-pong, one-sided streams, and
// the direct path's WRITE ping-pong that spins on memory).
func TestPerfStopsWhenTheDaemonDies(t *testing.T) {
	for _, args := range [][]string{
		{"rc_bw"},
		{"rc_lat"},
		{"rc_rdma_read_bw"},
		{"--trusted", "rc_rdma_write_lat"},
		{"--trusted", "rc_rdma_write_bw"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			d, sock := startDaemonProc(t)
			p := startVrdma(t, "vrdma perf", append([]string{"perf", "--loopback", "--socket", sock, "-t", "60"}, args...)...)
			awaitInstance(t, sock, "perf-b-")
			time.Sleep(300 * time.Millisecond) // into the test's loop; it must stop wherever it is
			d.Kill()
			p.expectGone(t, 30*time.Second) // half its -t: it stopped on the error, not at its time
		})
	}
}

// TestPerfClientStopsWhenTheDaemonDies: a `vrdma perf` client with a
// minute of rc_bw to run against a server on the same daemon, which is
// SIGKILLed: the client exits non-zero with the reason (the server
// serves on, as qperf's does, and fails each test it is asked for while
// there is no daemon).
func TestPerfClientStopsWhenTheDaemonDies(t *testing.T) {
	d, sock := startDaemonProc(t)
	var server *vrdmaProc
	var port string
	for i := 0; ; i++ { // a port picked free may be taken by the time it listens
		port = freePort(t)
		server = startVrdma(t, "the perf server", "perf", "--socket", sock, "-lp", port)
		time.Sleep(200 * time.Millisecond)
		if !server.Running() {
			if i == 10 {
				t.Fatalf("the perf server would not start: %s", server.Err.String())
			}
			continue
		}
		break
	}
	client := startVrdma(t, "the perf client", "perf", "--socket", sock, "-lp", port, "-t", "60", "127.0.0.1", "rc_bw")
	time.Sleep(500 * time.Millisecond) // into its test, most likely; it must stop wherever it is
	d.Kill()
	client.expectGone(t, 30*time.Second)
}

// TestPingpongStopsWhenTheDaemonDies: both ends of a pingpong with a
// billion iterations to go, polling and sleeping on events (-e).
func TestPingpongStopsWhenTheDaemonDies(t *testing.T) {
	for _, args := range [][]string{nil, {"-e"}} {
		t.Run("args="+strings.Join(args, " "), func(t *testing.T) {
			d, sock := startDaemonProc(t)
			server, client := connectPingpong(t, sock, args)
			server.awaitOutput(t, "remote address")
			time.Sleep(200 * time.Millisecond)
			d.Kill()
			client.expectGone(t, hangGuard)
			server.expectGone(t, hangGuard)
		})
	}
}

// printed waits until p prints want (true) or ends without it (false).
func (p *vrdmaProc) printed(t *testing.T, want string) bool {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !strings.Contains(p.Out.String(), want) {
		if !p.Running() {
			return strings.Contains(p.Out.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
		if time.Now().After(deadline) {
			t.Fatalf("%s neither printed %q nor ended in %v", p.name, want, hangGuard)
		}
	}
	return true
}

// connectPingpong starts a pingpong server and a client connected to it,
// with a billion iterations to go. A port picked free may be taken by the
// time the server listens (other tests' connections), so a server that
// cannot listen is tried again on another; a client that comes before the
// server listens is tried again.
func connectPingpong(t *testing.T, sock string, args []string) (server, client *vrdmaProc) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		common := append([]string{"pingpong", "--socket", sock, "-g", "0", "-p", freePort(t), "-n", "1000000000"}, args...)
		server = startVrdma(t, "the pingpong server", common...)
		for time.Now().Before(deadline) {
			client = startVrdma(t, "the pingpong client", append(common, "127.0.0.1")...)
			if client.printed(t, "remote address") {
				return server, client
			}
			time.Sleep(20 * time.Millisecond)
			if server.Running() {
				continue
			}
			break // it could not listen: another port
		}
	}
	t.Fatalf("no pingpong client connected to a server in %v", hangGuard)
	return nil, nil
}

// TestPingStopsWhenTheDaemonDies: a flood ping that would run until
// interrupted, and its responder.
func TestPingStopsWhenTheDaemonDies(t *testing.T) {
	d, sock := startDaemonProc(t)
	responder := startVrdma(t, "the ping responder", "ping", "-S", "--socket", sock, "-p", "0")
	responder.awaitOutput(t, "\n") // "... rendezvous on TCP port N": the port the system gave it
	m := regexp.MustCompile(`rendezvous on TCP port (\d+)`).FindStringSubmatch(responder.Out.String())
	if m == nil {
		t.Fatalf("the responder did not say its port: %s", responder.Out.String())
	}
	port := m[1]
	client := startVrdma(t, "the ping client", "ping", "--socket", sock, "-f", "-p", port, "127.0.0.1")
	client.awaitOutput(t, "Pong from")
	d.Kill()
	client.expectGone(t, hangGuard)
	responder.expectGone(t, hangGuard)
}
