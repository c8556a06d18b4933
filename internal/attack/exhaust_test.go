package attack

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// heldTenant is a tenant that ran its verbs and holds what they made until
// release.
type heldTenant struct {
	lines map[string]string
	stdin io.WriteCloser
	wait  func() error
}

// tenantHold runs a tenant whose last verb is hold and returns once it
// holds.
func tenantHold(t *testing.T, uid int, sock string, verbs ...string) *heldTenant {
	t.Helper()
	return holdCommand(t, tenantCommand(t, uid, sock, append(verbs, "hold")...))
}

// holdCommand starts a tenant that says "holding" once it holds what it
// made, and returns then.
func holdCommand(t *testing.T, cmd *exec.Cmd) *heldTenant {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &heldTenant{lines: map[string]string{}, stdin: in, wait: cmd.Wait}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	var all []string
	for sc.Scan() {
		l := sc.Text()
		all = append(all, l)
		if l == "holding" {
			go io.Copy(io.Discard, out)
			return h
		}
		if k, v, ok := strings.Cut(l, ": "); ok {
			h.lines[k] = v
		}
	}
	t.Fatalf("tenant %v ended before holding:\n%s", cmd.Args, strings.Join(all, "\n"))
	return nil
}

func (h *heldTenant) release() error {
	h.stdin.Close()
	return h.wait()
}

// openFiles returns how many descriptors process pid has open, and its
// RLIMIT_NOFILE.
func openFiles(t *testing.T, pid int) (open, limit int) {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.TrimPrefix(l, "Max open files")); strings.HasPrefix(l, "Max open files") && len(f) > 0 {
			limit, _ = strconv.Atoi(f[0])
		}
	}
	return len(ents), limit
}

// TestExhaustion: tenant A creates CQs until refused, then opens sessions
// until refused, and holds them all — the attacks that took a daemon to
// 19,997 of its 20,000 descriptors (other users' create_cq failed) and made
// it exit when its accept loop met the limit. A is stopped by its quotas
// with ErrLimit; tenant B still creates a CQ and opens a session; the
// daemon keeps a reserve of descriptors and serves; and once A is gone,
// everything A held is released.
func TestExhaustion(t *testing.T) {
	f := newScene(t, true)
	sock := f.a.Socket
	pid := f.a.Cmd.Process.Pid
	open0, limit := openFiles(t, pid)
	a := tenantHold(t, tenantA, sock, "cqs", "sessions")
	open1, _ := openFiles(t, pid)
	t.Logf("tenant A: cqs: %s; sessions: %s", a.lines["cqs"], a.lines["sessions"])
	t.Logf("daemon a's descriptors: %d before, %d with A's hoard, of %d", open0, open1, limit)
	for _, verb := range []string{"cqs", "sessions"} {
		if !strings.HasPrefix(a.lines[verb], "ErrLimit after ") || !strings.Contains(a.lines[verb], "--limit") {
			t.Errorf("tenant A's %s: %q, want ErrLimit naming the limit and how to raise it", verb, a.lines[verb])
		}
	}
	if open1 >= limit {
		t.Errorf("daemon a holds %d descriptors, at its limit %d", open1, limit)
	}
	b := tenantRun(t, tenantB, sock, "cq", "list")
	if b["cq"] != "ok 1" || !strings.HasPrefix(b["list"], "ok") {
		t.Errorf("tenant B while A holds its quotas: cq %q, list %q", b["cq"], b["list"])
	}
	if err := a.release(); err != nil {
		t.Errorf("tenant A: %v", err)
	}
	eventually(t, 30*time.Second, "A's objects are released", func() (bool, string) {
		st, err := f.admin(t, f.a).Stats()
		if err != nil {
			return false, err.Error()
		}
		return st.CQs == 0, fmt.Sprintf("%d CQs, %d sessions", st.CQs, st.Sessions)
	})
	open2, _ := openFiles(t, pid)
	t.Logf("daemon a's descriptors after A exited: %d", open2)
}
