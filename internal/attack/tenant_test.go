package attack

import (
	"strings"
	"testing"
)

// The tenants: uid 4001 (A) and 4002 (B), users of host a's daemon socket.
const (
	tenantA = 4001
	tenantB = 4002
)

// TestCrossTenant: tenant B against tenant A's instance on host a, the
// attack that attached to, deleted and joined the trust group of another
// user's instance. B is refused each with ErrPermission and does not see
// A's instance; A's instance is whole afterwards and A can use it.
func TestCrossTenant(t *testing.T) {
	f := newScene(t, true)
	sock := f.a.Socket
	a := tenantRun(t, tenantA, sock, "create", "a-vm", "group=a-group", "list")
	if !strings.HasPrefix(a["create a-vm"], "ok") {
		t.Fatalf("A creating its instance: %s", a["create a-vm"])
	}
	b := tenantRun(t, tenantB, sock, "attach", "a-vm", "delete", "a-vm", "create", "b-spy", "group=a-group", "list")
	for verb, want := range map[string]string{
		"attach a-vm": "ErrPermission", "delete a-vm": "ErrPermission", "create b-spy": "ErrPermission",
	} {
		if got := b[verb]; !strings.HasPrefix(got, want) {
			t.Errorf("B: %s: %q, want %s", verb, got, want)
		}
	}
	if strings.Contains(b["list"], "a-vm") {
		t.Errorf("B sees A's instance: %s", b["list"])
	}
	t.Logf("what B sees: %s", b["list"])
	a = tenantRun(t, tenantA, sock, "attach", "a-vm", "list")
	if !strings.HasPrefix(a["attach a-vm"], "ok") || !strings.Contains(a["list"], "a-vm") {
		t.Errorf("A after B's attempts: attach %q, list %q", a["attach a-vm"], a["list"])
	}
}
