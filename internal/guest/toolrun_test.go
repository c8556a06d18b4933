package guest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proctest"
)

// The end-to-end tests of tools_*_test.go run Debian's unmodified verbs
// programs (ibverbs-utils, perftest, qperf) on the library built from the
// embedded sources, against a daemon of the test's own. This file holds what
// they share: the library, built once per test binary, the daemon and its
// instances, and the running of programs with a hang guard.

// toolTimeout is the hang guard of one program: it is killed after this
// long. A run takes well under a second; the guard is for the bugs that
// hang (a lost completion, a server waiting for ever).
const toolTimeout = 30 * time.Second

// listenTimeout is how long a server may take to listen on its TCP port.
const listenTimeout = 15 * time.Second

var (
	libOnce  sync.Once
	libCache string // the temporary build cache, removed by TestMain
	libDir   string
	libErr   error
)

func TestMain(m *testing.M) {
	serveTestDaemon() // a daemon's process, when a test asks for one (lost_test.go)
	code := proctest.RunInPrivateRuntimeDir(m)
	if libCache != "" {
		os.RemoveAll(libCache)
	}
	removeCBuilds()
	os.Exit(code)
}

// guestLibrary returns the directory holding libibverbs.so.1 built from the
// embedded sources, building it on the first call of the test binary. It
// skips the test when the machine cannot build it (no compiler, no
// libibverbs-dev).
func guestLibrary(t *testing.T) string {
	t.Helper()
	libOnce.Do(func() {
		libCache, libErr = os.MkdirTemp("", "vrdma-guest-tools-")
		if libErr == nil {
			libDir, libErr = Build(libCache)
		}
	})
	var missing *MissingToolsError
	if errors.As(libErr, &missing) {
		t.Skipf("cannot build the guest library here: %v", libErr)
	}
	if libErr != nil {
		t.Fatalf("building the guest library: %v", libErr)
	}
	return libDir
}

// requireTool skips the test when program is not installed; pkg is the
// Debian package that provides it.
func requireTool(t *testing.T, program, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(program); err != nil {
		t.Skipf("%s is not installed: `apt-get install %s` (Debian, Ubuntu) to run this test", program, pkg)
	}
}

// toolHost is one host for the tools: a daemon of the test's own and the
// library its programs load.
type toolHost struct {
	lib     string        // the directory of libibverbs.so.1
	sock    string        // the daemon's socket
	quiet   bool          // no VRDMA_DEBUG: for programs whose report lines are parsed
	runtime string        // the programs' XDG_RUNTIME_DIR: where the library's sysfs tree goes
	preload string        // LD_PRELOAD of its programs ("": none), e.g. rdma-core's librspreload.so
	timeout time.Duration // the programs' hang guard; 0 is toolTimeout
}

// newToolHost builds (or reuses) the library and starts a daemon that lives
// until the test ends.
func newToolHost(t *testing.T) *toolHost {
	t.Helper()
	lib := guestLibrary(t)
	return &toolHost{lib: lib, sock: daemontest.Start(t), runtime: runtimeDir(t)}
}

// createInstance creates an instance on the host's daemon.
func (h *toolHost) createInstance(t *testing.T, spec vrdma.InstanceSpec) vrdma.InstanceInfo {
	t.Helper()
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: h.sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	info, err := adm.CreateInstance(spec)
	if err != nil {
		t.Fatalf("creating instance %s: %v", spec.Name, err)
	}
	return info
}

// devices lists the adapters of instance ("" is the default one) as the Go
// API reports them.
func (h *toolHost) devices(t *testing.T, instance string) []vrdma.DeviceInfo {
	t.Helper()
	devs, err := vrdma.Devices(vrdma.Options{Socket: h.sock, Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	return devs
}

// env is the environment of a program on instance ("" is the default one):
// the library first on the loader's path, the daemon's socket, the
// library's reasons for failures on stderr, the C locale.
func (h *toolHost) env(instance string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "LD_LIBRARY_PATH", "LD_PRELOAD", "VRDMA_SOCKET", "VRDMA_INSTANCE", "VRDMA_DEBUG", "LC_ALL", "XDG_RUNTIME_DIR":
		default:
			env = append(env, kv)
		}
	}
	debug := "VRDMA_DEBUG=1"
	if h.quiet {
		debug = "VRDMA_DEBUG=0"
	}
	env = append(env, "LD_LIBRARY_PATH="+h.lib, "VRDMA_SOCKET="+h.sock, debug, "LC_ALL=C")
	if h.runtime != "" {
		env = append(env, "XDG_RUNTIME_DIR="+h.runtime)
	}
	if instance != "" {
		env = append(env, "VRDMA_INSTANCE="+instance)
	}
	if h.preload != "" {
		env = append(env, "LD_PRELOAD="+h.preload)
	}
	return env
}

// runtimeDir returns a directory of the test's own, mode 0700, for a
// program's XDG_RUNTIME_DIR: the guest library's sysfs tree goes there, and
// goes with the test.
func runtimeDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// toolProc is a program started by start: its own process group, so that
// what it forks (qperf's server forks per client) is killed with it.
type toolProc struct {
	cmd  *exec.Cmd
	out  proctest.Buffer // stdout and stderr
	done chan struct{}
	err  error // how it ended, once done is closed
}

// start runs program with args on instance in the background, killed after
// the host's hang guard (toolTimeout unless set) and when the test ends.
func (h *toolHost) start(t *testing.T, instance, program string, args ...string) *toolProc {
	t.Helper()
	guard := toolTimeout
	if h.timeout > 0 {
		guard = h.timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	p := &toolProc{cmd: exec.CommandContext(ctx, program, args...), done: make(chan struct{})}
	p.cmd.Env = h.env(instance)
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Cancel = p.kill
	p.cmd.WaitDelay = 2 * time.Second // a forked child may hold the output open
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", program, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		cancel()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.kill()
		<-p.done
	})
	return p
}

// kill ends the program and everything in its process group.
func (p *toolProc) kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// wait waits for the program to end and returns its output; the test fails
// when it did not exit with status 0.
func (p *toolProc) wait(t *testing.T) string {
	t.Helper()
	<-p.done
	out := p.out.String()
	if p.err != nil {
		t.Fatalf("%s failed (%v); it printed:\n%s", strings.Join(p.cmd.Args, " "), p.err, out)
	}
	return out
}

// endOutput returns what the program printed once it has ended: on its
// own within a few seconds (a server whose client failed tells its side),
// or killed.
func (p *toolProc) endOutput() string {
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.kill()
		<-p.done
	}
	return p.out.String()
}

// run runs program with args on instance to its end and returns its output;
// the test fails unless it exits with status 0.
func (h *toolHost) run(t *testing.T, instance, program string, args ...string) string {
	t.Helper()
	return h.start(t, instance, program, args...).wait(t)
}

// startServer starts a server program and waits until it listens on TCP
// port, where its client connects.
func (h *toolHost) startServer(t *testing.T, instance string, port int, program string, args ...string) *toolProc {
	t.Helper()
	p := h.start(t, instance, program, args...)
	deadline := time.Now().Add(listenTimeout)
	for {
		listening, err := tcpListening(p.cmd.Process.Pid, port)
		if err != nil {
			t.Fatal(err)
		}
		if listening {
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("%s ended (%v) before listening on port %d; it printed:\n%s", strings.Join(p.cmd.Args, " "), p.err, port, p.out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = p.kill()
			<-p.done
			t.Fatalf("%s does not listen on port %d after %v; it printed:\n%s", strings.Join(p.cmd.Args, " "), port, listenTimeout, p.out.String())
		}
	}
}

// freePort returns a TCP port nobody listens on, for one server: tests
// that run at the same time (other packages, other checkouts) do not
// collide.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// tcpListening reports whether process pid holds a socket listening on
// TCP port. Whose socket it is matters: tests of other packages run at
// the same time, and their servers may take a port freePort has just
// handed out; a client sent to such a server talks to another daemon.
func tcpListening(pid, port int) (bool, error) {
	const listen = "0A" // TCP_LISTEN in the st column
	suffix := fmt.Sprintf(":%04X", port)
	inodes := map[string]bool{}
	// The process's own view: /proc/net is the thread group leader's
	// namespace, which a test that ran code in another namespace may have
	// left elsewhere.
	for _, file := range []string{fmt.Sprintf("/proc/%d/net/tcp", pid), fmt.Sprintf("/proc/%d/net/tcp6", pid)} {
		data, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) > 9 && strings.HasSuffix(f[1], suffix) && f[3] == listen {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false, nil // gone, or not yet exec'd: the caller sees it end
	}
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && inodes[link] {
			return true, nil
		}
	}
	return false, nil
}

// lineFields returns the whitespace-separated fields of the first line of out
// that begins with prefix (after leading blanks), and whether there is one.
func lineFields(out, prefix string) ([]string, bool) {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(strings.TrimSpace(line), prefix) {
			return strings.Fields(line), true
		}
	}
	return nil, false
}

// number parses a decimal field of a tool's output.
func number(t *testing.T, what, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s: %q is not a number: %v", what, s, err)
	}
	return v
}
