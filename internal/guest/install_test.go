package guest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInstallCopiesTheLibrary(t *testing.T) {
	requireCC(t)
	libDir, err := builder{src: fakeSources(true, "1"), cc: "cc"}.build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(libDir, SOName))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "usr", "local", "lib", "vrdma")
	for range 2 { // a second install replaces the first
		if err := Install(libDir, out); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(filepath.Join(out, SOName))
	if err != nil || string(got) != string(want) {
		t.Errorf("installed %s differs from the build (%v)", SOName, err)
	}
	if target, err := os.Readlink(filepath.Join(out, LinkName)); err != nil || target != SOName {
		t.Errorf("%s -> %q (%v), want %s", LinkName, target, err, SOName)
	}
	entries, _ := os.ReadDir(out)
	if len(entries) != 2 {
		t.Errorf("%s holds %v, want the library and its link", out, entries)
	}
}

func TestInstallCopiesLibrdmacm(t *testing.T) {
	requireCC(t)
	libDir, err := Build(t.TempDir())
	if err != nil {
		t.Skipf("cannot build the library here: %v", err)
	}
	out := t.TempDir()
	if err := Install(libDir, out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ so, link string }{{SOName, LinkName}, {RDMACMSOName, RDMACMLinkName}} {
		want, err := os.ReadFile(filepath.Join(libDir, f.so))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(out, f.so)); err != nil || string(got) != string(want) {
			t.Errorf("installed %s differs from the build (%v)", f.so, err)
		}
		if target, err := os.Readlink(filepath.Join(out, f.link)); err != nil || target != f.so {
			t.Errorf("%s -> %q (%v), want %s", f.link, target, err, f.so)
		}
	}
}

// TestInstallRefusesAnUnsafeDirectory: --out checks its directory and the
// parents as the build cache is checked, before it writes anything.
func TestInstallRefusesAnUnsafeDirectory(t *testing.T) {
	requireCC(t)
	libDir, err := builder{src: fakeSources(true, "1"), cc: "cc"}.build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		root  bool
		setup func(t *testing.T, base string)
		out   string // under base
		why   string
	}{
		{"a group-writable parent", false, func(t *testing.T, b string) { mkdir(t, b+"/usr", 0o775, -1) }, "usr/lib/vrdma", "writable by its group"},
		{"the directory world-writable", false, func(t *testing.T, b string) { mkdir(t, b+"/lib", 0o777, -1) }, "lib", "writable by others"},
		{"the directory another uid's", true, func(t *testing.T, b string) { mkdir(t, b+"/lib", 0o755, otherUID) }, "lib", "belongs to neither you"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				requireRoot(t)
			}
			base := t.TempDir()
			tt.setup(t, base)
			out := filepath.Join(base, tt.out)
			err := Install(libDir, out)
			if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), tt.why) || !strings.Contains(err.Error(), "the install directory") {
				t.Fatalf("err = %v, want an *UnsafeDirError saying %q", err, tt.why)
			}
			if _, err := os.Stat(filepath.Join(out, SOName)); err == nil {
				t.Errorf("%s was installed", SOName)
			}
		})
	}
}
