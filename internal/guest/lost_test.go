package guest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
		t.Fatalf("lost_peer exited %d:\n%s", code, p.Output())
	}
	t.Logf("%s", p.Output())
}
