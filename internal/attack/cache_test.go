package attack

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/netns"
)

// plantUID is the local user who plants a library for root to load.
const plantUID = 60001

// plantedSource is the attacker's libibverbs.so.1: a constructor that
// leaves the file MARKER, and the functions ibv_devices needs, at the
// versions it needs.
const plantedSource = `#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
	int fd = open(MARKER, O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
}
void **ibv_get_device_list(int *n) { if (n) *n = 0; static void *none[1]; return none; }
void ibv_free_device_list(void **l) { (void)l; }
const char *ibv_get_device_name(void *d) { (void)d; return "planted"; }
unsigned long long ibv_get_device_guid(void *d) { (void)d; return 0; }
`

// plantedLibrary compiles the attacker's library into dir, its
// constructor leaving marker.
func plantedLibrary(t *testing.T, dir, marker string) string {
	t.Helper()
	src := filepath.Join(dir, "planted.c")
	script := filepath.Join(dir, "planted.map")
	lib := filepath.Join(dir, "libibverbs.so.1")
	if err := os.WriteFile(src, []byte(plantedSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("IBVERBS_1.1 { global: ibv_*; local: *; };\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("cc", "-shared", "-fPIC", "-o", lib, "-Wl,-soname,libibverbs.so.1",
		"-Wl,--version-script="+script, `-DMARKER="`+marker+`"`, src).CombinedOutput()
	if err != nil {
		t.Fatalf("compiling the planted library: %v\n%s", err, out)
	}
	return lib
}

// chownAll gives everything under dir to uid.
func chownAll(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mkdirMode makes dir with mode (numbered as chmod numbers it: 01777 is
// sticky) and owner uid.
func mkdirMode(t *testing.T, dir string, mode uint32, uid, gid int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m := fs.FileMode(mode & 0o777)
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	if err := os.Chmod(dir, m); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the directory src to dst as root's, keeping modes and
// links.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", src, dst, err, out)
	}
}

// vrdmaAs runs root's vrdma with the guest cache and socket given and
// returns its exit status and output.
func vrdmaAs(t *testing.T, cache, sock string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard; a build takes seconds
	defer cancel()
	cmd := exec.CommandContext(ctx, netns.VRDMABinary(t), args...)
	cmd.Env = append(os.Environ(), "VRDMA_GUEST_CACHE="+cache, "VRDMA_SOCKET="+sock, "LD_LIBRARY_PATH=")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("vrdma %v: %v\n%s", args, err, out)
	return 0, ""
}

// TestPlantedGuestLibrary: another local user plants a libibverbs.so.1
// whose constructor runs code, where root's `vrdma guest build --out` and
// `vrdma run -- ibv_devices` look for their build — the attack that,
// before, installed the planted library and ran its constructor as root,
// since the cache directory's name is predictable (the attacker runs the
// same vrdma to learn it) and nothing checked owners or modes. Also: a
// published build altered in the user's own cache. Each is refused, with
// the reason, and the constructor never runs.
func TestPlantedGuestLibrary(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the attacker is another uid, and root the victim")
	}
	for _, tool := range []string{"cc", "ibv_devices", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (apt-get install gcc libibverbs-dev librdmacm-dev ibverbs-utils)", tool)
		}
	}
	base := t.TempDir()
	sock := filepath.Join(base, "no-daemon.sock") // vrdma run execs the tool at once
	// The build's name, as the attacker learns it: the same vrdma, on
	// the same compiler.
	own := filepath.Join(base, "own")
	code, out := vrdmaAs(t, own, sock, "guest", "path")
	if code != 0 {
		t.Fatalf("vrdma guest path: exit %d\n%s", code, out)
	}
	built := strings.TrimSpace(out)
	key := filepath.Base(built)

	// The planted library works: loaded as the victim would load it,
	// its constructor runs.
	probe := filepath.Join(base, "probe")
	mkdirMode(t, probe, 0o755, 0, 0)
	probeMarker := filepath.Join(base, "probe-ran")
	plantedLibrary(t, probe, probeMarker)
	probeCmd := exec.Command("ibv_devices")
	probeCmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+probe)
	probeOut, _ := probeCmd.CombinedOutput()
	if _, err := os.Stat(probeMarker); err != nil {
		t.Fatalf("the planted library's constructor did not run when loaded directly (%v): the test proves nothing\n%s", err, probeOut)
	}

	// plant puts the attacker's library into cache/KEY, owned by uid.
	plant := func(t *testing.T, cache string, uid int, marker string) {
		dir := filepath.Join(cache, key)
		mkdirMode(t, dir, 0o755, 0, 0)
		plantedLibrary(t, dir, marker)
		if err := os.Symlink("libibverbs.so.1", filepath.Join(dir, "libibverbs.so")); err != nil {
			t.Fatal(err)
		}
		chownAll(t, dir, uid)
	}
	tests := []struct {
		name string
		// setup makes the cache under dir, as it is when root runs
		// vrdma, and returns it.
		setup func(t *testing.T, dir, marker string) string
		want  string // in the refusal
	}{
		{"a shared cache in /tmp made first by another uid", func(t *testing.T, dir, marker string) string {
			mkdirMode(t, filepath.Join(dir, "tmp"), 0o1777, 0, 0)
			cache := filepath.Join(dir, "tmp", "vrdma-cache") // the old Dockerfile example's /tmp/vrdma-cache
			mkdirMode(t, cache, 0o755, plantUID, plantUID)
			plant(t, cache, plantUID, marker)
			return cache
		}, "belongs to neither you"},
		{"a shared cache anyone may write", func(t *testing.T, dir, marker string) string {
			cache := filepath.Join(dir, "shared")
			mkdirMode(t, cache, 0o777, 0, 0)
			plant(t, cache, plantUID, marker)
			return cache
		}, "is writable by others"},
		{"a group-writable parent", func(t *testing.T, dir, marker string) string {
			parent := filepath.Join(dir, "team")
			mkdirMode(t, parent, 0o775, 0, plantUID)
			cache := filepath.Join(parent, "cache")
			mkdirMode(t, cache, 0o700, 0, 0)
			plant(t, cache, 0, marker) // moved in by a member of the group
			return cache
		}, "is writable by its group"},
		{"a byte changed in the user's own cache", func(t *testing.T, dir, marker string) string {
			cache := filepath.Join(dir, "cache")
			mkdirMode(t, cache, 0o700, 0, 0)
			copyTree(t, built, cache)
			lib := filepath.Join(cache, key, "libibverbs.so.1")
			b, err := os.ReadFile(lib)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(lib, b, 0o755); err != nil {
				t.Fatal(err)
			}
			return cache
		}, "has SHA-256"},
		{"the library replaced in the user's own cache", func(t *testing.T, dir, marker string) string {
			cache := filepath.Join(dir, "cache")
			mkdirMode(t, cache, 0o700, 0, 0)
			copyTree(t, built, cache)
			plantedLibrary(t, filepath.Join(cache, key), marker)
			for _, f := range []string{"planted.c", "planted.map"} {
				if err := os.Remove(filepath.Join(cache, key, f)); err != nil {
					t.Fatal(err)
				}
			}
			return cache
		}, "has SHA-256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "constructor-ran")
			cache := tt.setup(t, dir, marker)
			lib := filepath.Join(dir, "lib")

			code, out := vrdmaAs(t, cache, sock, "guest", "build", "--out", lib)
			if code == 0 || !strings.Contains(out, "refusing") || !strings.Contains(out, tt.want) {
				t.Errorf("vrdma guest build --out: exit %d, said %q; want a refusal saying %q", code, out, tt.want)
			}
			if _, err := os.Stat(filepath.Join(lib, "libibverbs.so.1")); err == nil {
				t.Errorf("vrdma guest build --out installed %s/libibverbs.so.1", lib)
			}
			code, out = vrdmaAs(t, cache, sock, "run", "--", "ibv_devices")
			if code == 0 || !strings.Contains(out, "refusing") || !strings.Contains(out, tt.want) {
				t.Errorf("vrdma run -- ibv_devices: exit %d, said %q; want a refusal saying %q", code, out, tt.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the planted library's constructor ran as root")
			}
		})
	}
}
