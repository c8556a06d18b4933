package attack

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/netns"
)

// The command channel as a hostile tenant uses it, against one host's
// daemon on no switch whose socket every user may open.

// publicDaemon starts a daemon on one host, on no switch, open to every
// user of the host.
func publicDaemon(t *testing.T) *netns.Daemon {
	t.Helper()
	netns.Require(t)
	top := netns.New(t, 1)
	d := top.Hosts[0].StartDaemon(t, "--no-switch", "--mode", "0666", "--host-name", "solo")
	if err := os.Chmod(filepath.Dir(d.Socket), 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// tenantWithin is tenantRun with a deadline: a tenant still running after
// limit (a call that waits for ever) fails the test.
func tenantWithin(t *testing.T, limit time.Duration, uid int, sock string, verbs ...string) map[string]string {
	t.Helper()
	cmd := tenantCommand(t, uid, sock, verbs...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("tenant %d %.200v: %v\n%.2000s", uid, verbs, err, out.String())
		}
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("tenant %d %.200v still waits after %v (a reply that never came)\n%.2000s", uid, verbs, limit, out.String())
	}
	return lines(out.String())
}

// TestLargeReplies: tenant A creates 40 instances of 10 adapters; `vm
// show` (a reply above 64 KiB) answers A and root in full, no hang; a
// hello naming a 60,000-character instance is refused, briefly, saying
// what is wrong.
func TestLargeReplies(t *testing.T) {
	d := publicDaemon(t)
	a := tenantWithin(t, 2*time.Minute, tenantA, d.Socket, "many", "40", "10", "list")
	if !strings.HasPrefix(a["many"], "ok") {
		t.Fatalf("A creating 40 instances of 10 adapters: %s", a["many"])
	}
	if got := strings.Count(a["list"], "vm"); !strings.HasPrefix(a["list"], "ok") || got != 40 {
		t.Fatalf("A's vm show lists %d of its 40 instances: %.300s", got, a["list"])
	}
	// Root's vm show, as the command line does it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, netns.VRDMABinary(t), "vm", "show", "--socket", d.Socket).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("root's vm show still waits after a minute")
	}
	if err != nil {
		t.Fatalf("root's vm show: %v\n%.2000s", err, out)
	}
	if got := strings.Count(string(out), "u4001.vm"); got != 40 {
		t.Fatalf("root's vm show lists %d of A's 40 instances:\n%.3000s", got, out)
	}

	long := strings.Repeat("x", 60000)
	b := tenantWithin(t, time.Minute, tenantB, d.Socket, "attach", long)
	got := b["attach "+long]
	if !strings.HasPrefix(got, "ErrInvalidArgument") || !strings.Contains(got, "instance name") || !strings.Contains(got, "(60000 bytes)") || len(got) > 400 {
		t.Fatalf("a hello naming a 60,000-character instance: %.400s", got)
	}
	t.Logf("the refusal: %s", got)
}

// TestRefusalsAlike: tenant B asking to attach to or delete tenant A's
// instance — by A's name, or by the name root sees — gets exactly what
// it gets for one that does not exist; nothing names A.
func TestRefusalsAlike(t *testing.T) {
	d := publicDaemon(t)
	a := tenantWithin(t, time.Minute, tenantA, d.Socket, "create", "secret")
	if !strings.HasPrefix(a["create secret"], "ok") {
		t.Fatalf("A: %s", a["create secret"])
	}
	b := tenantWithin(t, time.Minute, tenantB, d.Socket,
		"attach", "secret", "attach", "nosuch", "delete", "secret", "delete", "nosuch",
		"attach", "u4001.secret", "attach", "u4001.nosuch", "delete", "u4001.secret", "delete", "u4001.nosuch")
	for _, verb := range []string{"attach ", "delete ", "attach u4001.", "delete u4001."} {
		theirs, none := b[verb+"secret"], b[verb+"nosuch"]
		if theirs == "" || strings.ReplaceAll(theirs, "secret", "nosuch") != none {
			t.Errorf("B: %ssecret: %q\n   %snosuch: %q\nwant the same refusal", verb, theirs, verb, none)
		}
		if !strings.HasPrefix(theirs, "ErrNotFound") || strings.Contains(theirs, "4001 ") || strings.Contains(theirs, "uid 4001") {
			t.Errorf("B: %ssecret: %q: want ErrNotFound naming no owner", verb, theirs)
		}
	}
	a = tenantWithin(t, time.Minute, tenantA, d.Socket, "attach", "secret")
	if !strings.HasPrefix(a["attach secret"], "ok") {
		t.Errorf("A after B: %s", a["attach secret"])
	}
	fi, err := os.Stat(filepath.Join(d.StateDir, "instances.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("instances.json is %v under --no-switch, want -rw-------", fi.Mode().Perm())
	}
}

// TestNoSquatting: B creates "db1" before A does. A still creates its
// "db1" and attaches to it, B attaches to its own, and root sees two.
func TestNoSquatting(t *testing.T) {
	d := publicDaemon(t)
	b := tenantWithin(t, time.Minute, tenantB, d.Socket, "create", "db1", "group=g")
	if !strings.HasPrefix(b["create db1"], "ok") {
		t.Fatalf("B: %s", b["create db1"])
	}
	a := tenantWithin(t, time.Minute, tenantA, d.Socket, "create", "db1", "group=g", "attach", "db1", "list")
	for _, verb := range []string{"create db1", "attach db1"} {
		if !strings.HasPrefix(a[verb], "ok") {
			t.Errorf("A after B took db1: %s: %s", verb, a[verb])
		}
	}
	if a["list"] != "ok db1,default" {
		t.Errorf("A sees %q, want its db1 and the default", a["list"])
	}
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: d.Socket})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	insts, err := adm.Instances()
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]uint32{}
	for _, i := range insts {
		owners[i.Name+" "+i.TrustGroup] = i.Owner.UID
	}
	if owners["u4001.db1 u4001.g"] != tenantA || owners["u4002.db1 u4002.g"] != tenantB || len(owners) != 3 {
		t.Errorf("root sees %v, want A's db1 in A's g and B's in B's", owners)
	}
	// Root's own db1 is a third one, and root names A's as it sees it.
	if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: "db1", Adapters: 1}); err != nil {
		t.Errorf("root's db1: %v", err)
	}
	if err := adm.DeleteInstance("u4002.db1"); err != nil && !errors.Is(err, vrdma.ErrBusy) {
		t.Errorf("root deleting B's db1: %v", err)
	}
}
