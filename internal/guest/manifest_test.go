package guest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// TestBuildRefusesAnAlteredBuild: a build in the cache that is not as the
// build left it is neither used nor installed, and not rebuilt over
// either: the error says what changed and to remove it.
func TestBuildRefusesAnAlteredBuild(t *testing.T) {
	requireCC(t)
	tests := []struct {
		name   string
		root   bool // needs root (chown)
		alter  func(t *testing.T, dir string)
		path   string // what the error names, under the build
		why    string
		unused bool // the change leaves Install's files alone
	}{
		{"a byte of the library changed", false, func(t *testing.T, dir string) {
			p := filepath.Join(dir, SOName)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			if err := os.WriteFile(p, b, 0o755); err != nil {
				t.Fatal(err)
			}
		}, SOName, "has SHA-256", false},
		{"a library added", false, func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "libc.so.6"), []byte("planted"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "libc.so.6", "is there but not recorded", true},
		{"the link re-pointed", false, func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, LinkName)); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/tmp/elsewhere.so", filepath.Join(dir, LinkName)); err != nil {
				t.Fatal(err)
			}
		}, LinkName, `is a link to "/tmp/elsewhere.so"`, true},
		{"a source removed", false, func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "src", "fake.c")); err != nil {
				t.Fatal(err)
			}
		}, "src/fake.c", "is missing", true},
		{"the manifest removed", false, func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, ManifestName)); err != nil {
				t.Fatal(err)
			}
		}, ManifestName, "cannot be read", false},
		{"the library group-writable", false, func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, SOName), 0o775); err != nil {
				t.Fatal(err)
			}
		}, SOName, "writable by group or others", false},
		{"the library another uid's", true, func(t *testing.T, dir string) {
			if err := os.Chown(filepath.Join(dir, SOName), otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
		}, SOName, "belongs to uid 60001", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				requireRoot(t)
			}
			cc, compiles := countingCC(t)
			b := builder{src: fakeSources(true, "1"), cc: cc}
			cache := t.TempDir()
			dir, err := b.build(cache)
			if err != nil {
				t.Fatal(err)
			}
			tt.alter(t, dir)
			_, err = b.build(cache)
			var ae *AlteredBuildError
			if !errors.As(err, &ae) || !errors.Is(err, ErrAlteredBuild) {
				t.Fatalf("build after the change: err = %v, want an *AlteredBuildError", err)
			}
			if ae.Path != tt.path || !strings.Contains(err.Error(), tt.why) || !strings.Contains(err.Error(), "rm -r "+dir) {
				t.Errorf("the error does not say %s %s and to remove %s:\n%v", tt.path, tt.why, dir, err)
			}
			if n := compiles(); n != 1 {
				t.Errorf("%d compilations: the altered build was built over", n)
			}
			out := filepath.Join(t.TempDir(), "lib")
			if err := Install(dir, out); !errors.Is(err, ErrAlteredBuild) {
				t.Errorf("Install of the altered build: err = %v, want ErrAlteredBuild", err)
			}
			if _, err := os.Stat(filepath.Join(out, SOName)); err == nil {
				t.Errorf("Install copied %s from the altered build", SOName)
			}
		})
	}
}

// TestPublishKeepsTheWinner: a build that loses the race to publish leaves
// the winner's build in place, and the loser uses it.
func TestPublishKeepsTheWinner(t *testing.T) {
	requireCC(t)
	cache := t.TempDir()
	winner, err := builder{src: fakeSources(true, "1"), cc: "cc"}.build(cache)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(winner, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	loser := filepath.Join(cache, ".build-loser")
	if err := os.MkdirAll(filepath.Join(loser, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(loser, SOName), []byte("the loser's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := seal(loser); err != nil {
		t.Fatal(err)
	}
	if err := publish(loser, winner); err != nil {
		t.Fatalf("publish after another build landed: %v", err)
	}
	after, err := os.ReadFile(filepath.Join(winner, ManifestName))
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the winner's build changed (%v)", err)
	}
	if _, err := verifyBuild(winner); err != nil {
		t.Error(err)
	}
}

// TestUserBuildWarnsWithoutFailing: the build vrdma run does on a user's
// machine has no -Werror, so a warning a newer compiler adds is printed
// and the build goes on; the project's tests add -Werror (below, and
// TestCUnits), so that a warning still fails them.
func TestUserBuildWarnsWithoutFailing(t *testing.T) {
	requireCC(t)
	for _, f := range cflags {
		if strings.HasPrefix(f, "-Werror") {
			t.Errorf("the user's build has %s", f)
		}
	}
	var warned bytes.Buffer
	src := fakeSources(false, "1")
	src["warn.c"] = &fstest.MapFile{Data: []byte("int warned(int unused_parameter) { return 0; }\n")}
	dir, err := builder{src: src, cc: "cc", warnings: &warned}.build(t.TempDir())
	if err != nil {
		t.Fatalf("a warning failed the user's build: %v", err)
	}
	if !built(t, dir) {
		t.Error("no library")
	}
	if !strings.Contains(warned.String(), "unused_parameter") || !strings.Contains(warned.String(), "the build goes on") {
		t.Errorf("the warning was not shown: %q", warned.String())
	}
	if _, err := (builder{src: src, cc: "cc", extraFlags: []string{"-Werror"}}).build(t.TempDir()); err == nil {
		t.Error("the same sources built with the tests' -Werror")
	}
}

// TestLibraryCompilesWithoutWarnings: the embedded sources build with
// -Werror added, so that a warning fails the project's tests (not the
// users' builds).
func TestLibraryCompilesWithoutWarnings(t *testing.T) {
	requireToolchain(t)
	var warned bytes.Buffer
	_, err := builder{src: Sources(), cc: "cc", header: "infiniband/verbs.h", extraFlags: []string{"-Werror"}, warnings: &warned}.build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if warned.Len() > 0 {
		t.Errorf("the compiler printed:\n%s", warned.String())
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add(manifest{"libibverbs.so.1": {'f', strings.Repeat("ab", 32)}, "libibverbs.so": {'l', "libibverbs.so.1"}, "src": {'d', "-"}}.encode())
	f.Add([]byte(manifestHeader + "\nf 00 x\n"))
	f.Add([]byte(manifestHeader + "\nd - ../x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest(data)
		if err != nil {
			return
		}
		again, err := parseManifest(m.encode())
		if err != nil {
			t.Fatalf("re-reading what encode wrote: %v", err)
		}
		if len(again) != len(m) {
			t.Fatalf("%d entries, then %d", len(m), len(again))
		}
		for p, e := range m {
			if again[p] != e {
				t.Fatalf("%s: %v, then %v", p, e, again[p])
			}
		}
	})
}
