package attack

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// TestMulticastTenants: tenant B joins the multicast group tenant A uses
// (the same address, 239.9.9.9, on the same host's daemon) and must not
// get A's datagrams: groups are the tenant's (docs/design/multicast.md).
// A's own receiver, in the same group, gets all ten, which proves the
// datagrams were sent and copied before B is checked; B's receiver waits
// for one datagram (mckey -C 1) and must still be waiting.
func TestMulticastTenants(t *testing.T) {
	guesttest.RequirePrograms(t, "mckey", "stdbuf")
	sock := soloDaemon(t, false)
	lib := readableLibrary(t)
	const group = "239.9.9.9"
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	spy := startTenantProgram(t, ctx, tenantB, sock, lib, "mckey", "-m", group, "-b", "127.0.0.1", "-C", "1")
	spy.waitFor(t, "rdma_cm: joined multicast group")
	rcv := startTenantProgram(t, ctx, tenantA, sock, lib, "mckey", "-m", group, "-b", "127.0.0.1", "-C", "10")
	rcv.waitFor(t, "rdma_cm: joined multicast group")
	snd := startTenantProgram(t, ctx, tenantA, sock, lib, "mckey", "-m", group, "-b", "127.0.0.1", "-C", "10", "-s")
	for _, p := range []*tenantProgram{snd, rcv} {
		<-p.done
		if out := p.text(); p.err != nil || !strings.Contains(out, "test complete") {
			t.Fatalf("tenant A's %s failed (%v):\n%s", strings.Join(p.cmd.Args, " "), p.err, out)
		}
	}
	// A's receiver had its ten: B's copy, had there been one, was made in
	// the same pass of the sender. Give B's program the time to notice.
	select {
	case <-spy.done:
		t.Errorf("tenant B's receiver in A's group ended (%v): it got A's datagram:\n%s", spy.err, spy.text())
	case <-time.After(2 * time.Second):
	}
	if strings.Contains(spy.text(), "data transfers complete") {
		t.Errorf("tenant B received tenant A's multicast:\n%s", spy.text())
	}
}

// readableLibrary copies the guest libraries into a directory every
// tenant may read.
func readableLibrary(t *testing.T) string {
	t.Helper()
	src := guesttest.Library(t)
	dir, err := os.MkdirTemp("", "vrdma-attack-lib-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tenantProgram is a program run as a tenant, its output read as it runs.
type tenantProgram struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (p *tenantProgram) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *tenantProgram) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startTenantProgram runs name (line-buffered) as uid with the guest
// library lib against the daemon at sock, with the library's debug lines.
func startTenantProgram(t *testing.T, ctx context.Context, uid int, sock, lib, name string, args ...string) *tenantProgram {
	t.Helper()
	runtime, err := os.MkdirTemp("", "vrdma-attack-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runtime) })
	if err := os.Chown(runtime, uid, uid); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "stdbuf", append([]string{"-oL", name}, args...)...)
	cmd.Dir = runtime
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LD_LIBRARY_PATH=" + lib, "VRDMA_SOCKET=" + sock, "VRDMA_DEBUG=1",
		"XDG_RUNTIME_DIR=" + runtime, "HOME=" + runtime, "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}, Setpgid: true}
	p := &tenantProgram{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s as uid %d: %v", name, uid, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

// waitFor waits until the program printed want; the test fails if it ends
// first, or after 30 s.
func (p *tenantProgram) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(p.text(), want) {
		select {
		case <-p.done:
			t.Fatalf("%s ended (%v) before printing %q:\n%s", strings.Join(p.cmd.Args, " "), p.err, want, p.text())
		case <-deadline:
			t.Fatalf("%s did not print %q in 30 s:\n%s", strings.Join(p.cmd.Args, " "), want, p.text())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
