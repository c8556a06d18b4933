package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/proctest"
)

// pairDeadline turns a hang into a failure: a pingpong pair ends in well
// under a second.
const pairDeadline = 60 * time.Second

// TestRunPingpongPairWithoutADaemon: an ibv_rc_pingpong server and client,
// each under its own `vrdma run` with no daemon running, as a newcomer
// tries them. Both end with the data exchanged, each with the other's
// address: a client that reports success while the server hangs (each on
// a daemon of its own, identical to the other, the client talked to
// itself) fails.
func TestRunPingpongPairWithoutADaemon(t *testing.T) {
	if _, err := exec.LookPath("ibv_rc_pingpong"); err != nil {
		t.Skip("ibv_rc_pingpong is missing: apt-get install ibverbs-utils")
	}
	lib := guesttest.Library(t)
	env := childEnv(t, lib) // one user: one XDG_RUNTIME_DIR for both
	ctx, cancel := context.WithTimeout(context.Background(), pairDeadline)
	defer cancel()
	port := freePort(t)

	server := pairCommand(ctx, env, "-g", "0", "-p", port) // -g: a RoCE port needs a GRH
	var serverOut, serverErr proctest.Buffer
	server.Stdout, server.Stderr = &serverOut, &serverErr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	serverDone := make(chan error, 1)
	go func() { serverDone <- server.Wait() }()
	// A client that comes before the server listens is refused the
	// connection, and tries again (the server's output, a pipe, is
	// buffered until it ends: it cannot say when it listens).
	var clientOut, clientErr string
	var clientState *os.ProcessState
	for {
		client := pairCommand(ctx, env, "-g", "0", "-p", port, "localhost")
		var out, errs strings.Builder
		client.Stdout, client.Stderr = &out, &errs
		_ = client.Run()
		clientOut, clientErr, clientState = out.String(), errs.String(), client.ProcessState
		if !strings.Contains(clientOut+clientErr, "Couldn't connect") || ctx.Err() != nil {
			break
		}
		select {
		case err := <-serverDone:
			t.Fatalf("the server ended before a client connected (%v): %s%s", err, serverOut.String(), serverErr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	var serverErrWait error
	select {
	case serverErrWait = <-serverDone:
	case <-ctx.Done():
		serverErrWait = <-serverDone // killed by the context
	}
	serverHung := ctx.Err() != nil
	clientOK := clientState != nil && clientState.ExitCode() == 0
	if serverHung && clientOK {
		t.Fatalf("the client reported success while the server hung for %v:\nclient:\n%s%s\nserver:\n%s%s",
			pairDeadline, clientOut, clientErr, serverOut.String(), serverErr.String())
	}
	if !clientOK || serverErrWait != nil {
		t.Fatalf("client exit %v, server %v, want both 0:\nclient:\n%s%s\nserver:\n%s%s",
			clientState, serverErrWait, clientOut, clientErr, serverOut.String(), serverErr.String())
	}
	for _, out := range []string{clientOut, serverOut.String()} {
		if !strings.Contains(out, "1000 iters") {
			t.Errorf("no 1000 iters in\n%s", out)
		}
	}
	// Each talked to the other: the client's remote QP is the server's own.
	sl, sr := pingpongQPNs(t, serverOut.String())
	cl, cr := pingpongQPNs(t, clientOut)
	if cr != sl || sr != cl || cl == sl {
		t.Errorf("server QPN %s (its peer %s), client QPN %s (its peer %s): want two QPs, each the other's peer", sl, sr, cl, cr)
	}
	awaitGone(t, filepath.Join(envValue(env, "XDG_RUNTIME_DIR"), "vrdma", userSocketName))
}

// pairCommand is `vrdma run -- ibv_rc_pingpong args...` in a process
// group of its own, which ctx's end kills whole: a pingpong that vrdma
// runs as its child (not only one it becomes) ends too.
func pairCommand(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"run", "--", "ibv_rc_pingpong"}, args...)...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

var pingpongAddress = regexp.MustCompile(`(?m)^\s*(local|remote) address:.*QPN (0x[0-9a-f]+)`)

// pingpongQPNs returns the local and remote QPNs a pingpong printed.
func pingpongQPNs(t *testing.T, out string) (local, remote string) {
	t.Helper()
	for _, m := range pingpongAddress.FindAllStringSubmatch(out, -1) {
		if m[1] == "local" {
			local = m[2]
		} else {
			remote = m[2]
		}
	}
	if local == "" || remote == "" {
		t.Fatalf("no local and remote address in\n%s", out)
	}
	return local, remote
}

// envValue returns the last value of name in env.
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// TestRunUserDaemonOutlivesTheFirstProgram: a second vrdma run attaches to
// the daemon the first one started, and keeps it for as long as its
// command runs: the first program ending, and the daemon's idle time
// passing before the second command connects, end nothing.
func TestRunUserDaemonOutlivesTheFirstProgram(t *testing.T) {
	libDir := fakeLibDir(t, t.TempDir())
	env := childEnv(t, libDir)
	attached := filepath.Join(t.TempDir(), "attached")
	// The first program ends once the second is attached.
	first := exec.Command(os.Args[0], "run", "--", "sh", "-c", `while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", attached)
	first.Env = env
	var firstErr proctest.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Wait() }()
	sock := filepath.Join(envValue(env, "XDG_RUNTIME_DIR"), "vrdma", userSocketName)
	for !daemonAnswers(sock) {
		select {
		case err := <-firstDone:
			t.Fatalf("the first program ended (%v) before its daemon served: %s", err, firstErr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The second says it is attached, waits three idle times (the first
	// has ended by then), and only then uses the daemon.
	script := `touch "$1"; sleep 3; exec "$2" devices`
	second := exec.Command(os.Args[0], "run", "--", "sh", "-c", script, "sh", attached, os.Args[0])
	second.Env = env
	out, err := second.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "vrdma0") {
		t.Fatalf("the second program: %v\n%s\nwant vrdma0 listed by the daemon the first started", err, out)
	}
	if !strings.Contains(string(out), "already running") {
		t.Errorf("the second vrdma run did not attach to the first one's daemon:\n%s", out)
	}
	if err := <-firstDone; err != nil {
		t.Errorf("the first program: %v: %s", err, firstErr.String())
	}
	awaitGone(t, sock)
}

// TestRunStartsOneDaemonForManyAtOnce: vrdma runs that start together on a
// machine with no daemon start one daemon between them, and all use it.
func TestRunStartsOneDaemonForManyAtOnce(t *testing.T) {
	libDir := fakeLibDir(t, t.TempDir())
	env := childEnv(t, libDir)
	const n = 4
	type result struct {
		out []byte
		err error
	}
	results := make(chan result, n)
	for range n {
		go func() {
			cmd := exec.Command(os.Args[0], "run", "--", "sh", "-c", `sleep 1`)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			results <- result{out, err}
		}()
	}
	started := 0
	for range n {
		r := <-results
		if r.err != nil {
			t.Errorf("a vrdma run failed: %v\n%s", r.err, r.out)
		}
		if strings.Contains(string(r.out), "started now") {
			started++
		}
	}
	if started != 1 {
		t.Errorf("%d of %d vrdma runs started a daemon, want 1", started, n)
	}
	awaitGone(t, filepath.Join(envValue(env, "XDG_RUNTIME_DIR"), "vrdma", userSocketName))
}
