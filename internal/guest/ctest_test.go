package guest

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The library's compiler flags (see the build), and what the C unit tests
// add: the sanitizers, which stop at the first error.
var (
	libFlags      = []string{"-std=c11", "-D_GNU_SOURCE", "-O2", "-g", "-fPIC", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"}
	sanitizeFlags = []string{"-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"}
)

// verbsHeader is the rdma-core header the library compiles against.
const verbsHeader = "/usr/include/infiniband/verbs.h"

// TestCUnits builds every csrc/tests/*_test.c with the library sources its
// "sources:" line names, twice: with the sanitizers, and plainly with the
// library's flags (so that -O2 warnings fail too); it runs both and fails
// with a program's output when it fails.
func TestCUnits(t *testing.T) {
	cc := requireToolchain(t)
	tests, err := filepath.Glob(filepath.Join("csrc", "tests", "*_test.c"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		t.Fatal("no C unit tests under csrc/tests")
	}
	csrc, err := filepath.Abs("csrc")
	if err != nil {
		t.Fatal(err)
	}
	builds := []struct {
		name  string
		flags []string
	}{
		{"sanitized", append(append([]string(nil), libFlags...), sanitizeFlags...)},
		{"plain", libFlags},
	}
	for _, test := range tests {
		name := strings.TrimSuffix(filepath.Base(test), ".c")
		t.Run(name, func(t *testing.T) {
			srcs, err := testSources(test)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range builds {
				t.Run(b.name, func(t *testing.T) {
					bin := filepath.Join(t.TempDir(), name)
					args := append(append([]string(nil), b.flags...), "-I", csrc, "-o", bin, filepath.Join(csrc, "tests", filepath.Base(test)))
					for _, s := range srcs {
						args = append(args, filepath.Join(csrc, s))
					}
					args = append(args, "-lpthread")
					if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
						t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
					}
					// A hang guard only; the tests take well under a second.
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					defer cancel()
					cmd := exec.CommandContext(ctx, bin)
					cmd.Env = append(os.Environ(), "ASAN_OPTIONS=abort_on_error=0:detect_leaks=1", "UBSAN_OPTIONS=print_stacktrace=1")
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("%s: %v\n%s", name, err, out)
					}
					t.Logf("%s", out)
				})
			}
		})
	}
}

// requireToolchain returns the C compiler, or skips the test when it or
// rdma-core's headers are missing.
func requireToolchain(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) to build the guest library's unit tests: install the Debian packages gcc and libibverbs-dev")
	}
	if _, err := os.Stat(verbsHeader); err != nil {
		t.Skipf("no %s to build the guest library's unit tests against: install the Debian packages gcc and libibverbs-dev", verbsHeader)
	}
	return cc
}

// testSources reads the library sources a C test needs from its
// "sources: a.c b.c" line (in its opening comment).
func testSources(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		line = strings.TrimSpace(strings.TrimPrefix(line, "*"))
		if rest, ok := strings.CutPrefix(line, "sources:"); ok {
			srcs := strings.Fields(rest)
			for _, s := range srcs {
				if !strings.HasSuffix(s, ".c") || strings.ContainsAny(s, "/\\") {
					return nil, errors.New(path + ": the sources line names " + s + ", not a .c file of csrc/")
				}
			}
			return srcs, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New(path + ": no \"sources: a.c b.c\" line naming the library files the test needs")
}
