package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/pki"
)

// TestSwitchCAAndHostCert: `vrdma switch ca init` and `vrdma host cert`
// make the files a daemon's --pki takes, with private keys, and refuse
// what would break a switch or leave a host unreachable.
func TestSwitchCAAndHostCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if code, out, errs := vrdmaCmd(t, "switch", "ca", "init", "--dir", dir); code != 0 || !strings.Contains(out, "ca.pem") {
		t.Fatalf("switch ca init: %d %s %s", code, out, errs)
	}
	if code, _, errs := vrdmaCmd(t, "switch", "ca", "init", "--dir", dir); code != 1 || !strings.Contains(errs, "has a CA already") {
		t.Errorf("a second switch ca init: %d %s", code, errs)
	}
	if code, out, errs := vrdmaCmd(t, "host", "cert", "a", "--ip", "10.0.0.1,fd00::1", "--dir", dir); code != 0 || !strings.Contains(out, "a.pem") {
		t.Fatalf("host cert: %d %s %s", code, out, errs)
	}
	for f, mode := range map[string]os.FileMode{"ca.key": 0o600, "a.key": 0o600, "ca.pem": 0o644, "a.pem": 0o644} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %04o, want %04o", f, st.Mode().Perm(), mode)
		}
	}
	m, err := pki.LoadMember(dir, "a")
	if err != nil {
		t.Fatalf("the daemon's --pki could not load host a: %v", err)
	}
	if len(m.Leaf.IPAddresses) != 2 {
		t.Errorf("host a's certificate lists %v, want 10.0.0.1 and fd00::1", m.Leaf.IPAddresses)
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no --ip", []string{"host", "cert", "b", "--dir", dir}, 2, "--ip is missing"},
		{"the same host again", []string{"host", "cert", "a", "--ip", "10.0.0.1", "--dir", dir}, 1, "--force"},
		{"a bad address", []string{"host", "cert", "b", "--ip", "10.0.0.300", "--dir", dir}, 2, "not an IP address"},
		{"a bad name", []string{"host", "cert", "b/c", "--ip", "10.0.0.2", "--dir", dir}, 1, "host"},
		{"no CA", []string{"host", "cert", "b", "--ip", "10.0.0.2", "--dir", t.TempDir()}, 1, "vrdma switch ca init"},
		{"no subcommand", []string{"switch", "ca"}, 2, "switch ca init"},
	} {
		code, _, errs := vrdmaCmd(t, tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.says) {
			t.Errorf("%s: exit %d, %q; want exit %d saying %q", tt.name, code, errs, tt.code, tt.says)
		}
	}
	if code, _, errs := vrdmaCmd(t, "host", "cert", "a", "--ip", "10.0.0.9", "--dir", dir, "--force"); code != 0 {
		t.Errorf("host cert --force: %d %s", code, errs)
	}
}
