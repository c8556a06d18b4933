package guest

import (
	"debug/elf"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

// requireCC skips the test when there is no C compiler.
func requireCC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc) in $PATH: `apt-get install gcc` to run this test")
	}
}

// built reports whether dir holds a finished build that passes the checks
// made before it is loaded.
func built(t *testing.T, dir string) bool {
	t.Helper()
	if _, err := verifyBuild(dir); err != nil {
		t.Log(err)
		return false
	}
	_, err := os.Stat(filepath.Join(dir, SOName))
	return err == nil
}

// fakeSources is a library of one exported function, one hidden one and,
// when script, a version script that versions the exported one.
func fakeSources(script bool, body string) fstest.MapFS {
	src := fstest.MapFS{
		"fake.c": {Data: []byte(`#include "fake.h"
__attribute__((visibility("default"))) int ibv_fake(void) { return helper() + ` + body + `; }
`)},
		"helper.c":     {Data: []byte("#include \"fake.h\"\nint helper(void) { return 41; }\n")},
		"fake.h":       {Data: []byte("int helper(void);\n")},
		"tests/t.c":    {Data: []byte("this is not C: the build compiles only the top directory's .c files\n")},
		"tests/README": {Data: []byte("unit tests\n")},
	}
	if script {
		src[VersionScript] = &fstest.MapFile{Data: []byte("IBVERBS_1.0 { global: ibv_fake; local: *; };\n")}
	}
	return src
}

// countingCC writes a compiler that counts its compilations (not its
// --version or -E runs) in a file and hands everything to cc.
func countingCC(t *testing.T) (cc string, count func() int) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "compiles")
	cc = filepath.Join(dir, "cc-counting")
	script := "#!/bin/sh\ncase \"$*\" in --version|*' -E '*) ;; *) echo compile >>'" + log + "' ;; esac\nexec cc \"$@\"\n"
	if err := os.WriteFile(cc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return cc, func() int {
		b, err := os.ReadFile(log)
		if errors.Is(err, fs.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "compile\n")
	}
}

func TestBuildMakesLibibverbsSo1(t *testing.T) {
	requireCC(t)
	for _, script := range []bool{true, false} {
		name := "without version script"
		if script {
			name = "with version script"
		}
		t.Run(name, func(t *testing.T) {
			dir, err := builder{src: fakeSources(script, "1"), cc: "cc"}.build(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.Open(filepath.Join(dir, SOName))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if soname, err := f.DynString(elf.DT_SONAME); err != nil || !slices.Equal(soname, []string{SOName}) {
				t.Errorf("soname %q (%v), want [%s]", soname, err, SOName)
			}
			syms, err := f.DynamicSymbols()
			if err != nil {
				t.Fatal(err)
			}
			exported := map[string]elf.Symbol{}
			for _, s := range syms {
				if s.Section != elf.SHN_UNDEF {
					exported[s.Name] = s
				}
			}
			s, ok := exported["ibv_fake"]
			if !ok {
				t.Fatalf("ibv_fake is not exported: %v", exported)
			}
			if _, ok := exported["helper"]; ok {
				t.Error("helper is exported: the build is not -fvisibility=hidden")
			}
			if wantVersion := map[bool]string{true: "IBVERBS_1.0", false: ""}[script]; s.Version != wantVersion {
				t.Errorf("ibv_fake has version %q, want %q", s.Version, wantVersion)
			}
			if target, err := os.Readlink(filepath.Join(dir, LinkName)); err != nil || target != SOName {
				t.Errorf("%s -> %q (%v), want %s", LinkName, target, err, SOName)
			}
			if _, err := os.Stat(filepath.Join(dir, "src", "tests", "t.c")); err != nil {
				t.Errorf("the sources are not kept beside the library: %v", err)
			}
		})
	}
}

func TestBuildReusesTheCache(t *testing.T) {
	requireCC(t)
	cc, compiles := countingCC(t)
	b := builder{src: fakeSources(true, "1"), cc: cc}
	cache := t.TempDir()
	first, err := b.build(cache)
	if err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(first, SOName)
	old := time.Unix(1_000_000_000, 0)
	if err := os.Chtimes(lib, old, old); err != nil {
		t.Fatal(err)
	}
	second, err := b.build(cache)
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Errorf("second build in %s, first in %s", second, first)
	}
	if st, err := os.Stat(lib); err != nil || !st.ModTime().Equal(old) {
		t.Errorf("the library was rewritten by the second build: %v %v", st.ModTime(), err)
	}
	if n := compiles(); n != 1 {
		t.Errorf("%d compilations for two builds of the same sources, want 1", n)
	}
}

func TestBuildRebuildsWhenTheSourcesChange(t *testing.T) {
	requireCC(t)
	cache := t.TempDir()
	first, err := builder{src: fakeSources(true, "1"), cc: "cc"}.build(cache)
	if err != nil {
		t.Fatal(err)
	}
	changed := fakeSources(true, "2")
	second, err := builder{src: changed, cc: "cc"}.build(cache)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatalf("changed sources built into the same directory %s", first)
	}
	// A file that is not compiled is part of the key too.
	changed["tests/README"] = &fstest.MapFile{Data: []byte("changed\n")}
	third, err := builder{src: changed, cc: "cc"}.build(cache)
	if err != nil {
		t.Fatal(err)
	}
	if third == second {
		t.Fatalf("a changed tests/README built into the same directory %s", second)
	}
	for _, dir := range []string{first, second, third} {
		if !built(t, dir) {
			t.Errorf("%s holds no library", dir)
		}
	}
	src, err := os.ReadFile(filepath.Join(second, "src", "fake.c"))
	if err != nil || !strings.Contains(string(src), "+ 2;") {
		t.Errorf("%s/src/fake.c is not the changed source: %q %v", second, src, err)
	}
}

func TestBuildConcurrentFirstUses(t *testing.T) {
	requireCC(t)
	cache := t.TempDir()
	b := builder{src: fakeSources(true, "1"), cc: "cc"}
	const n = 4
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dirs[i], errs[i] = b.build(cache) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("build %d: %v", i, errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Errorf("build %d in %s, build 0 in %s", i, dirs[i], dirs[0])
		}
	}
	if !built(t, dirs[0]) {
		t.Errorf("%s holds no library", dirs[0])
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the cache holds %d entries, want the one build: %v", len(entries), entries)
	}
}

func TestBuildWithoutTheToolsSaysWhatToInstall(t *testing.T) {
	tests := []struct {
		name     string
		cc       string // "" keeps the real one
		header   string
		packages []string
		want     string
	}{
		{"no compiler", "cc", "", []string{compilerPackage}, "apt-get install gcc"},
		{"no headers", "", "vrdma-test/no-such-verbs.h", []string{headersPackage}, "apt-get install libibverbs-dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := builder{src: fakeSources(true, "1"), cc: tt.cc, header: tt.header}
			if tt.cc == "" {
				requireCC(t)
				b.cc = "cc"
			} else {
				t.Setenv("PATH", t.TempDir()) // no compiler there
			}
			_, err := b.build(t.TempDir())
			var missing *MissingToolsError
			if !errors.As(err, &missing) {
				t.Fatalf("err = %v, want a *MissingToolsError", err)
			}
			// Without a compiler the headers are looked for in
			// /usr/include: this machine may lack them too.
			if tt.cc != "" {
				if _, statErr := os.Stat(headersFile); statErr != nil {
					tt.packages = append(tt.packages, headersPackage)
					tt.want += " " + headersPackage
				}
			}
			if !slices.Equal(missing.Packages, tt.packages) {
				t.Errorf("packages %q, want %q", missing.Packages, tt.packages)
			}
			if msg := err.Error(); !strings.Contains(msg, "`"+tt.want+"`") {
				t.Errorf("error %q does not say `%s`", msg, tt.want)
			}
		})
	}
}

func TestBuildReturnsTheCompilersOutput(t *testing.T) {
	requireCC(t)
	tests := []struct {
		name, source string
		extraFlags   []string
		want         string
	}{
		{"error", "int f(void) { return no_such_variable; }\n", nil, "no_such_variable"},
		{"warning, with the tests' -Werror", "int f(int unused_parameter) { return 0; }\n", []string{"-Werror"}, "unused_parameter"},
		{"undefined symbol, with -z defs", "int no_such_function(void);\nint f(void) { return no_such_function(); }\n", nil, "no_such_function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := t.TempDir()
			src := fstest.MapFS{"bad.c": {Data: []byte(tt.source)}}
			_, err := builder{src: src, cc: "cc", extraFlags: tt.extraFlags}.build(cache)
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *CompileError", err)
			}
			if !strings.Contains(ce.Output, tt.want) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("the error does not quote the compiler on %s:\n%v", tt.want, err)
			}
			if entries, _ := os.ReadDir(cache); len(entries) != 0 {
				t.Errorf("a failed build left %v in the cache", entries)
			}
		})
	}
}

func TestBuildWithoutCSourcesFails(t *testing.T) {
	_, err := builder{src: fstest.MapFS{"vrdma.h": {Data: []byte("\n")}}, cc: "cc"}.build(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no .c file") {
		t.Fatalf("err = %v, want one saying there is no .c file", err)
	}
}

func TestBuildInARelativeCacheReturnsAnAbsoluteDir(t *testing.T) {
	requireCC(t)
	t.Chdir(t.TempDir())
	dir, err := builder{src: fakeSources(false, "1"), cc: "cc"}.build("cache")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(dir) || !built(t, dir) {
		t.Errorf("built into %q, want an absolute directory holding the library", dir)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	tests := []struct {
		name                string
		override, xdg, home string
		want                string
		err                 error
	}{
		{"override", "/o", "/x", "/h", "/o", nil},
		{"XDG_CACHE_HOME", "", "/x", "/h", "/x/vrdma", nil},
		{"HOME", "", "", "/h", "/h/.cache/vrdma", nil},
		{"none", "", "", "", "", ErrNoCacheDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(CacheEnv, tt.override)
			t.Setenv("XDG_CACHE_HOME", tt.xdg)
			t.Setenv("HOME", tt.home)
			got, err := DefaultCacheDir()
			if got != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("DefaultCacheDir() = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}
