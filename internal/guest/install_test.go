package guest

import (
	"os"
	"path/filepath"
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
