package vrdma

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLibraryLinksNoSwitchDaemon: a program that imports package vrdma
// links neither the etcd client nor the daemon's switch (internal/fabric,
// internal/switchagent), and switchview, whose records the library
// returns, imports only the standard library (docs/design/switchview-package.md).
func TestLibraryLinksNoSwitchDaemon(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the packages' dependencies")
	}
	deps := func(pkg string) []string {
		out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	for _, tt := range []struct {
		pkg    string
		refuse func(dep string) bool
	}{
		{"github.com/vrdma/vrdma", func(d string) bool {
			return strings.HasPrefix(d, "go.etcd.io/") || strings.HasSuffix(d, "/internal/fabric") || strings.HasSuffix(d, "/internal/switchagent")
		}},
		{"github.com/vrdma/vrdma/switchview", func(d string) bool { return d != "github.com/vrdma/vrdma/switchview" }},
	} {
		var bad []string
		for _, d := range deps(tt.pkg) {
			if tt.refuse(d) {
				bad = append(bad, d)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s links %d packages it must not, among them %s", tt.pkg, len(bad), strings.Join(bad[:min(len(bad), 5)], ", "))
		}
	}
}
