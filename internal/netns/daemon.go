package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/pki"
	"github.com/vrdma/vrdma/internal/proctest"
)

// stopTimeout is how long a daemon has to exit after SIGTERM before it gets
// SIGKILL.
const stopTimeout = 10 * time.Second

var vrdmaBuild struct {
	once sync.Once
	path string
	err  error
}

// VRDMABinary returns the path of a vrdma binary built from this module's
// cmd/vrdma, once per test binary: `go build -o tmp/vrdma ./cmd/vrdma` in
// the module root (built under a temporary name, then renamed, so that test
// binaries building at the same time do not trip over each other). If
// $VRDMA_BINARY is set, that binary is used instead and nothing is built.
func VRDMABinary(t testing.TB) string {
	t.Helper()
	vrdmaBuild.once.Do(func() { vrdmaBuild.path, vrdmaBuild.err = buildVRDMA() })
	if vrdmaBuild.err != nil {
		t.Fatalf("netns: building vrdma: %v", vrdmaBuild.err)
	}
	return vrdmaBuild.path
}

func buildVRDMA() (string, error) {
	if p := os.Getenv("VRDMA_BINARY"); p != "" {
		return filepath.Abs(p)
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is not on the PATH: %w", err)
	}
	dir := filepath.Join(root, "tmp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".vrdma.%d", os.Getpid()))
	cmd := exec.Command(goBin, "build", "-o", tmp, "./cmd/vrdma")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build ./cmd/vrdma in %s: %v\n%s", root, err, out)
	}
	bin := filepath.Join(dir, "vrdma")
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return bin, nil
}

// ModuleRoot returns the directory of the go.mod enclosing the working
// directory (a test's working directory is its package's directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in the working directory or above it")
		}
		dir = parent
	}
}

// Daemon is a `vrdma daemon` process running in a host's namespace.
type Daemon struct {
	Host     *Host
	Socket   string    // its unix socket (reachable from every namespace: it is a path)
	StateDir string    // its --state-dir
	Cmd      *exec.Cmd // the process; Cmd.Process.Pid is the daemon's PID

	bin  string          // the vrdma binary
	dir  string          // temporary directory holding Socket and StateDir
	out  proctest.Buffer // stdout and stderr
	done chan struct{}   // closed when the process has exited
	err  error           // Wait's result, once done is closed

	killed bool // Kill ended it: its exit is no failure
}

// Kill ends the daemon with SIGKILL, as a crash would, and waits until it
// has exited; the test does not fail for it.
func (d *Daemon) Kill(t testing.TB) {
	t.Helper()
	d.killed = true
	if err := d.Cmd.Process.Kill(); err != nil {
		t.Fatalf("netns: killing the daemon on %s: %v", d.Host.Name, err)
	}
	<-d.done
}

// StartDaemon starts `vrdma daemon --socket S --state-dir DIR ARGS...` in the
// host's namespace, with S and DIR in a new temporary directory, and waits
// until the socket accepts connections. The daemon runs in its own UTS
// namespace with the host's Name as hostname, so that daemons on different
// hosts derive different MAC addresses for their adapters. It is stopped
// when the test ends (SIGTERM, then SIGKILL after 10 s, by its PID); its
// output goes to the test log if the test failed, and the test fails if the
// daemon exited before that, or with an error.
func (h *Host) StartDaemon(t testing.TB, args ...string) *Daemon {
	t.Helper()
	bin := VRDMABinary(t)
	dir, err := os.MkdirTemp("", "vrdma-"+h.Name+"-")
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{
		Host:     h,
		Socket:   filepath.Join(dir, "vrdma.sock"),
		StateDir: filepath.Join(dir, "state"),
		bin:      bin,
		dir:      dir,
		done:     make(chan struct{}),
	}
	// unshare(1) and sh exec in place: the PID stays the daemon's.
	const setHostname = `echo "$0" > /proc/sys/kernel/hostname && exec "$@"`
	argv := append([]string{"--uts", "sh", "-c", setHostname, h.Name,
		bin, "daemon", "--socket", d.Socket, "--state-dir", d.StateDir}, args...)
	d.Cmd = h.Command(context.Background(), "unshare", argv...)
	d.Cmd.Stdout, d.Cmd.Stderr = &d.out, &d.out
	if err := d.Cmd.Start(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("netns: starting the daemon on %s: %v", h.Name, err)
	}
	go func() {
		d.err = d.Cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() { d.stop(t) })
	if err := d.waitReady(readyTimeout); err != nil {
		t.Fatalf("netns: daemon on %s: %v\noutput:\n%s", h.Name, err, d.out.String())
	}
	return d
}

// waitReady waits until the socket accepts a connection, or the process ends.
func (d *Daemon) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.Dial("unixpacket", d.Socket)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("exited before serving: %v", d.err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("socket %s not accepting after %v: %v", d.Socket, limit, err)
		}
	}
}

func (d *Daemon) stop(t testing.TB) {
	if d.killed {
		if t.Failed() {
			t.Logf("daemon on %s (killed), output:\n%s", d.Host.Name, d.out.String())
		}
		if err := os.RemoveAll(d.dir); err != nil {
			t.Errorf("netns: %v", err)
		}
		return
	}
	exitedEarly := false
	select {
	case <-d.done:
		exitedEarly = true
	default:
		d.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(stopTimeout):
			t.Errorf("netns: daemon on %s (pid %d) still running %v after SIGTERM: killing it", d.Host.Name, d.Cmd.Process.Pid, stopTimeout)
			d.Cmd.Process.Kill()
			<-d.done
		}
	}
	switch {
	case exitedEarly:
		t.Errorf("netns: daemon on %s exited during the test: %v\noutput:\n%s", d.Host.Name, d.err, d.out.String())
	case d.err != nil:
		t.Errorf("netns: daemon on %s: %v after SIGTERM\noutput:\n%s", d.Host.Name, d.err, d.out.String())
	case t.Failed():
		t.Logf("daemon on %s, output:\n%s", d.Host.Name, d.out.String())
	}
	if err := os.RemoveAll(d.dir); err != nil {
		t.Errorf("netns: %v", err)
	}
}

// Output returns what the daemon printed so far (stdout and stderr).
func (d *Daemon) Output() string { return d.out.String() }

// Vrdma runs `vrdma ARGS` in the daemon's namespace with VRDMA_SOCKET set
// to its socket and returns the standard output; the test fails if it does.
func (d *Daemon) Vrdma(t testing.TB, args ...string) string {
	t.Helper()
	return runCmd(t, d.Command(t.Context(), args...))
}

// Command returns `vrdma ARGS` to run in the daemon's namespace with
// VRDMA_SOCKET set to its socket, for a test that starts it in the
// background or checks its failure.
func (d *Daemon) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := d.Host.Command(ctx, d.bin, args...)
	cmd.Env = append(os.Environ(), "VRDMA_SOCKET="+d.Socket)
	return cmd
}

// SwitchPKI makes a switch CA and a certificate for each host named in
// hosts (its --host-name, with its address for etcd's peer checks) in a
// new directory, as `vrdma switch ca init` and `vrdma host cert` do, and
// returns the directory: every daemon of a test switch can take it as its
// --pki.
func SwitchPKI(t testing.TB, hosts map[string]netip.Addr) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vrdma-pki-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ca, err := pki.InitCA(dir, "vrdma")
	if err != nil {
		t.Fatal(err)
	}
	for name, ip := range hosts {
		if err := ca.IssueHost(dir, pki.HostSpec{Name: name, IPs: []netip.Addr{ip}}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
