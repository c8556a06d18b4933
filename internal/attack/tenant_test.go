package attack

import (
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/netns"
)

// The tenants: uid 4001 (A) and 4002 (B), users of host a's daemon socket.
const (
	tenantA = 4001
	tenantB = 4002
)

// TestCrossTenant: tenant B against tenant A's instance on host a, the
// attack that attached to, deleted and joined the trust group of another
// user's instance. A's names are A's: B's "a-vm" is an instance B does not
// have (ErrNotFound, as for any other), and B's trust group "a-group" is
// B's own, which A's instances are not in. B does not see A's instance;
// A's instance is whole afterwards and A can use it.
func TestCrossTenant(t *testing.T) {
	f := newScene(t, true)
	sock := f.a.Socket
	a := tenantRun(t, tenantA, sock, "create", "a-vm", "group=a-group", "list")
	if !strings.HasPrefix(a["create a-vm"], "ok") {
		t.Fatalf("A creating its instance: %s", a["create a-vm"])
	}
	b := tenantRun(t, tenantB, sock, "attach", "a-vm", "delete", "a-vm", "attach", "u4001.a-vm", "delete", "u4001.a-vm", "create", "b-spy", "group=a-group", "list")
	for verb, want := range map[string]string{
		"attach a-vm": "ErrNotFound", "delete a-vm": "ErrNotFound", "attach u4001.a-vm": "ErrNotFound", "delete u4001.a-vm": "ErrNotFound",
		"create b-spy": "ok",
	} {
		if got := b[verb]; !strings.HasPrefix(got, want) {
			t.Errorf("B: %s: %q, want %s", verb, got, want)
		}
	}
	if strings.Contains(b["list"], "a-vm") {
		t.Errorf("B sees A's instance: %s", b["list"])
	}
	t.Logf("what B sees: %s", b["list"])
	// vrdma path: on A's host, and on host b, where the switch's record
	// (which names no owner) is all the daemon knows of A's instance.
	for _, d := range []*netns.Daemon{f.a, f.b} {
		p := tenantRun(t, tenantB, d.Socket, "create", "b-own",
			"path", "u4001.a-vm/vrdma0", "b-own/vrdma0", "path", "u4001.nosuch/vrdma0", "b-own/vrdma0")
		theirs, none := p["path u4001.a-vm/vrdma0"], p["path u4001.nosuch/vrdma0"]
		if !strings.HasPrefix(theirs, "ErrNotFound") || strings.ReplaceAll(theirs, "a-vm", "nosuch") != none {
			t.Errorf("B on %s: path to A's instance: %q\n  to none: %q\nwant the same ErrNotFound", d.Socket, theirs, none)
		}
	}
	if _, err := f.admin(t, f.b).Path("u4001.a-vm/vrdma0", "u4002.b-own/vrdma0"); err != nil {
		t.Errorf("root on host b: path to A's instance: %v", err)
	}
	insts, err := f.admin(t, f.a).Instances()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range insts {
		if i.Name == "u4002.b-spy" && i.TrustGroup != "u4002.a-group" {
			t.Errorf("B's b-spy is in trust group %q, want B's own u4002.a-group", i.TrustGroup)
		}
	}
	a = tenantRun(t, tenantA, sock, "attach", "a-vm", "list")
	if !strings.HasPrefix(a["attach a-vm"], "ok") || !strings.Contains(a["list"], "a-vm") {
		t.Errorf("A after B's attempts: attach %q, list %q", a["attach a-vm"], a["list"])
	}
}
