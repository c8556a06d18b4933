package guest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// TestBuildProgram: a program is built once into the checked cache and
// reused; one changed after it was sealed is refused, not rerun; a missing
// header says which package to install.
func TestBuildProgram(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler")
	}
	cache := t.TempDir()
	p := Program{Name: "vrdma-test-prog", Src: fstest.MapFS{"main.c": {Data: []byte("int main(void) { return 7; }\n")}}}
	exe, err := BuildProgram(cache, p)
	if err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := exec.Command(exe).Run(); !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("the built program: %v, want exit 7", err)
	}
	again, err := BuildProgram(cache, p)
	if err != nil || again != exe {
		t.Fatalf("second build: %q, %v; want the cached %q", again, err, exe)
	}
	if err := os.Chmod(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildProgram(cache, p); !errors.Is(err, ErrAlteredBuild) {
		t.Fatalf("a changed build: %v, want ErrAlteredBuild", err)
	}
	p.Name, p.Header, p.Package = "vrdma-test-prog2", "vrdma/no-such-header.h", "vrdma-no-such-dev"
	var me *MissingToolsError
	if _, err := BuildProgram(t.TempDir(), p); !errors.As(err, &me) || me.Packages[0] != "vrdma-no-such-dev" {
		t.Fatalf("a missing header: %v, want a MissingToolsError naming the package", err)
	}
}
