package guest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/proctest"
)

// testDaemonEnv, set to a socket path, makes the test binary a daemon
// serving on it until it is killed (TestMain): a daemon in a process of
// its own, which a test can SIGKILL under a program.
const testDaemonEnv = "VRDMA_GUEST_TEST_DAEMON"

// serveTestDaemon runs the daemon testDaemonEnv asks for and does not
// return; without it, it returns at once.
func serveTestDaemon() {
	sock := os.Getenv(testDaemonEnv)
	if sock == "" {
		return
	}
	d, err := daemon.New(daemon.Config{SocketPath: sock, StateDir: filepath.Join(filepath.Dir(sock), "state"), HostName: "test"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("serving")
	if err := d.Serve(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(1)
}

// startDaemonProcess runs a daemon in a process of its own and returns it
// and its socket.
func startDaemonProcess(t *testing.T) (*proctest.Proc, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "vrdma.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), testDaemonEnv+"="+sock)
	d := proctest.Start(t, cmd)
	d.AwaitOutput(t, "serving", hangGuard)
	return d, sock
}

// TestVerbsWhenTheDaemonDies runs csrc/tests/lost_peer.c (see its comment
// for what it checks) against a daemon in a process of its own, and
// SIGKILLs the daemon when the program has work outstanding and threads
// asleep: the program must see the loss everywhere and end by itself.
func TestVerbsWhenTheDaemonDies(t *testing.T) {
	cc := requireToolchain(t)
	bin := buildCTest(t, cc, append(append([]string(nil), libFlags...), sanitizeFlags...), "lost_peer.c")
	d, sock := startDaemonProcess(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), append(sanitizeEnv, "VRDMA_SOCKET="+sock, "VRDMA_INSTANCE=", "VRDMA_DEBUG=1", "XDG_RUNTIME_DIR="+runtimeDir(t))...)
	p := proctest.Start(t, cmd)
	p.AwaitOutput(t, "kill", hangGuard)
	d.Kill()
	if code := p.AwaitExit(t, 30*time.Second); code != 0 {
		t.Fatalf("lost_peer exited %d; its failed checks:\n%s\nall it printed:\n%s", code, failedChecks(p.Err.String()), p.Output())
	}
	// The loss is logged where it was noticed, not again by each command
	// that fails after it (the cleanup's destroys, one line each before).
	if n := strings.Count(p.Err.String(), "vrdma0: the vrdma daemon went away: the device is lost and its queues are dead"); n != 0 {
		t.Errorf("the commands after the loss logged it %d times:\n%s", n, p.Output())
	}
	t.Logf("%s", p.Output())
}

// checkLine is a line check.h's CHECK prints for a condition that did not
// hold ("path/file.c:123: cond: reason"), or the count a program ends with.
var checkLine = regexp.MustCompile(`^\S+\.c:\d+: |^\S+: \d+ failures$`)

// failedChecks picks a C program's failed CHECK lines out of what it
// printed, so a failure names them first however many lines the library
// logged around them.
func failedChecks(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		if checkLine.MatchString(strings.TrimRight(line, "\n")) {
			b.WriteString(line)
		}
	}
	if b.Len() == 0 {
		return "(none printed: it crashed or was killed)\n"
	}
	return b.String()
}

func TestFailedChecks(t *testing.T) {
	for _, tc := range []struct {
		name, out, want string
	}{
		{"none", "vrdma: vrdma0: went away\n", "(none printed: it crashed or was killed)\n"},
		{"among the library's lines",
			"vrdma: a\n/x/csrc/tests/lost_peer.c:289: poll(&p, 1, 0) == 1: the async fd is not readable\nvrdma: b\nvrdma: b\nlost_peer: 1 failures\n",
			"/x/csrc/tests/lost_peer.c:289: poll(&p, 1, 0) == 1: the async fd is not readable\nlost_peer: 1 failures\n"},
		{"no newline at the end", "tests/a.c:1: x: y", "tests/a.c:1: x: y"},
		{"a log line naming a file", "vrdma: see lost.c:12: here\n", "(none printed: it crashed or was killed)\n"},
	} {
		if got := failedChecks(tc.out); got != tc.want {
			t.Errorf("%s: failedChecks = %q, want %q", tc.name, got, tc.want)
		}
	}
}
