package itest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemon"
)

// The outside review's attacks, played by real processes of other users
// against a daemon whose socket every user may open.

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs clients as other users (CI runs it as root)")
	}
}

// child runs the test binary in role as uid (and gid uid) against sock.
func child(t *testing.T, role, sock string, uid uint32, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), childEnv+"="+role, "VRDMA_SOCKET="+sock, "VRDMA_INSTANCE="), env...)
	asUser(t, cmd, uid, uid)
	return cmd
}

// TestTenantCannotTouchAnothersInstance: tenant B (nobody) cannot attach
// to, delete, or join the trust group of tenant A's instance, does not see
// it in vm show, and cannot add links or port groups; A can use its own.
func TestTenantCannotTouchAnothersInstance(t *testing.T) {
	needRoot(t)
	sock := publicDaemon(t)
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	// Root makes a-vm for A (vm create a-vm --owner 4001:4001 --trust-group ga).
	if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: "a-vm", Adapters: 1, TrustGroup: "ga", Owner: &vrdma.Owner{UID: tenantA, GID: tenantA}}); err != nil {
		t.Fatal(err)
	}
	out, err := child(t, "owner", sock, tenantA).CombinedOutput()
	t.Logf("tenant A:\n%s", out)
	if err != nil {
		t.Fatalf("tenant A: %v", err)
	}
	out, err = child(t, "attacker", sock, attacker).CombinedOutput()
	t.Logf("tenant B:\n%s", out)
	if err != nil {
		t.Fatalf("tenant B: %v", err)
	}
	insts, err := adm.Instances()
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, i := range insts {
		owners[i.Name] = fmt.Sprintf("%d %s", i.Owner.UID, i.TrustGroup)
	}
	// Root sees tenants' instances and groups by their canonical names.
	want := map[string]string{"default": "0 ", "u4001.a-vm": "4001 u4001.ga", "u4001.a-own": "4001 u4001.ga",
		"u65534.b-own": "65534 ", "u65534.b-spy": "65534 u65534.ga"}
	if fmt.Sprint(owners) != fmt.Sprint(want) {
		t.Fatalf("root sees %v, want %v: B changed something", owners, want)
	}
}

// TestAdminGroupAdministers: a member of --admin-group (a supplementary
// group, read from /proc) administers, but does not get into tenants'
// instances or trust groups.
func TestAdminGroupAdministers(t *testing.T) {
	needRoot(t)
	sock := publicDaemonWith(t, func(c *daemon.Config) { c.AdminGroup = "4242" })
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: "a-vm", Adapters: 1, TrustGroup: "ga", Owner: &vrdma.Owner{UID: tenantA, GID: tenantA}}); err != nil {
		t.Fatal(err)
	}
	cmd := child(t, "admin", sock, 4002)
	cmd.SysProcAttr.Credential.Groups = []uint32{4242}
	out, err := cmd.CombinedOutput()
	t.Logf("the administrator:\n%s", out)
	if err != nil {
		t.Fatalf("the administrator: %v", err)
	}
}

// hog starts a child that holds what it takes until the test ends, and
// returns its output so far (up to the line holding, or the end).
type hog struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines []string
}

func startHog(t *testing.T, cmd *exec.Cmd, lines int) *hog {
	t.Helper()
	h := &hog{cmd: cmd}
	var err error
	if h.stdin, err = cmd.StdinPipe(); err != nil {
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
	t.Cleanup(func() { h.kill() })
	r := bufio.NewReader(out)
	for len(h.lines) < lines {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the hog said %q and ended: %v", h.lines, err)
		}
		h.lines = append(h.lines, strings.TrimSpace(line))
		if strings.HasPrefix(line, "FAIL") {
			t.Fatalf("the hog: %q", h.lines)
		}
	}
	return h
}

func (h *hog) kill() {
	if h.cmd.ProcessState == nil {
		h.cmd.Process.Kill()
		h.cmd.Wait()
	}
}

// TestCQLoopStopsAtQuota: a tenant creating CQs in a loop stops at its
// quota, the max_cq its device advertises, with ErrLimit naming the limit;
// another tenant's create_cq still succeeds; everything comes back when
// the hog dies.
func TestCQLoopStopsAtQuota(t *testing.T) {
	needRoot(t)
	sock := publicDaemon(t)
	h := startHog(t, child(t, "cqhog", sock, attacker), 2)
	var n, maxCQ int
	if _, err := fmt.Sscan(h.lines[0], &n, &maxCQ); err != nil {
		t.Fatalf("the hog said %q", h.lines)
	}
	t.Logf("the hog made %d CQs (max_cq %d) and heard: %s", n, maxCQ, h.lines[1])
	if n != maxCQ || !strings.Contains(h.lines[1], fmt.Sprintf("limit cq=%d", maxCQ)) || !strings.Contains(h.lines[1], "--limit cq=N") {
		t.Fatalf("made %d CQs of the %d advertised; refusal %q should name the limit and how to raise it", n, maxCQ, h.lines[1])
	}
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	cq, err := dev.CreateCQ(16)
	if err != nil {
		t.Fatalf("another tenant's create_cq while the hog holds its quota: %v", err)
	}
	cq.Destroy()
	h.kill()
	waitStats(t, sock, vrdma.DaemonStats{Sessions: 2}) // ours: dev and the probe
}

// TestSessionLoopStopsAtQuota: a tenant opening sessions in a loop is
// stopped by its quota; another tenant still connects.
func TestSessionLoopStopsAtQuota(t *testing.T) {
	needRoot(t)
	sock := publicDaemon(t)
	h := startHog(t, child(t, "sessionhog", sock, attacker), 2)
	t.Logf("the hog opened %s sessions and heard: %s", h.lines[0], h.lines[1])
	if !strings.Contains(h.lines[1], "limit session=") || !strings.Contains(h.lines[1], "--limit session=N") {
		t.Fatalf("refusal %q should name the limit and how to raise it", h.lines[1])
	}
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatalf("another tenant while the hog holds its sessions: %v", err)
	}
	dev.Close()
	h.kill()
	waitStats(t, sock, vrdma.DaemonStats{Sessions: 1})
}

// waitStats waits until the daemon counts want (the probe's own session
// included); the timeout is a hang guard.
func waitStats(t *testing.T, sock string, want vrdma.DaemonStats) {
	t.Helper()
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := adm.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon counts %+v, want %+v", st, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDaemonSurvivesDescriptorExhaustion: a daemon under a low
// RLIMIT_NOFILE, which it cannot raise, and with no session or CQ limit:
// a client takes every descriptor it can get, and is refused with
// ErrLimit before the daemon runs short; meanwhile the daemon answers
// every new client (with a refusal), and once the hog is gone it serves
// again in full.
func TestDaemonSurvivesDescriptorExhaustion(t *testing.T) {
	needRoot(t)
	dir, err := os.MkdirTemp("", "vrdma-lowfd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "vrdma.sock")
	d := child(t, "lowfd-daemon", sock, attacker, "VRDMA_NOFILE=256")
	dh := startHog(t, d, 1)
	if dh.lines[0] != "ready 256" {
		t.Fatalf("the daemon said %q", dh.lines)
	}
	h := startHog(t, child(t, "fdhog", sock, attacker), 3)
	t.Logf("the hog: %q", h.lines)
	for _, l := range h.lines[:2] {
		if !strings.Contains(l, "RLIMIT_NOFILE") {
			t.Fatalf("refusal %q does not say the daemon is short of descriptors and how to raise its limit", l)
		}
	}
	// The daemon is alive and answers: a new client is refused, and told why.
	_, err = vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if !errors.Is(err, vrdma.ErrLimit) {
		t.Fatalf("a new client while the hog holds every descriptor: %v, want ErrLimit", err)
	}
	if err := d.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the daemon died: %v", err)
	}
	h.kill()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := useDevice(sock)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not recover after the hog died: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// useDevice opens vrdma0 and creates a CQ and a QP.
func useDevice(sock string) error {
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: sock})
	if err != nil {
		return err
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	cq, err := dev.CreateCQ(16)
	if err != nil {
		return err
	}
	_, err = pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq, Cap: vrdma.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	return err
}
