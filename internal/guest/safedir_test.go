package guest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// otherUID owns what another user planted; the tests that chown to it
// need root.
const otherUID = 60001

// requireRoot skips a test that gives files to another uid.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give files to another uid")
	}
}

// mkdir makes dir with mode, numbered as chmod numbers it (01777 is
// sticky), and, if uid >= 0, owner uid.
func mkdir(t *testing.T, dir string, mode uint32, uid int) {
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
	if uid >= 0 {
		if err := os.Lchown(dir, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSecureDir(t *testing.T) {
	tests := []struct {
		name  string
		root  bool                            // needs root (chown)
		setup func(t *testing.T, base string) // makes what is under base
		dir   string                          // asked for, under base
		path  string                          // the directory at fault, under base; "" when accepted
		why   string                          // what the refusal says
	}{
		{"own, made", false, func(*testing.T, string) {}, "a/b/cache", "", ""},
		{"own 0755, there", false, func(t *testing.T, b string) { mkdir(t, b+"/cache", 0o755, -1) }, "cache", "", ""},
		{"in a sticky parent", false, func(t *testing.T, b string) { mkdir(t, b+"/tmp", 0o1777, -1) }, "tmp/cache", "", ""},
		{"the dir itself sticky", false, func(t *testing.T, b string) { mkdir(t, b+"/tmp", 0o1777, -1) }, "tmp", "tmp", "writable by others (the sticky bit"},
		{"the dir world-writable", false, func(t *testing.T, b string) { mkdir(t, b+"/cache", 0o777, -1) }, "cache", "cache", "writable by others"},
		{"a group-writable parent", false, func(t *testing.T, b string) { mkdir(t, b+"/shared", 0o775, -1) }, "shared/cache", "shared", "writable by its group"},
		{"a world-writable parent, no sticky bit", false, func(t *testing.T, b string) { mkdir(t, b+"/shared", 0o777, -1) }, "shared/x/cache", "shared", "writable by others"},
		{"the dir another uid's", true, func(t *testing.T, b string) { mkdir(t, b+"/cache", 0o755, otherUID) }, "cache", "cache", "belongs to neither you"},
		{"the dir another uid's, in a sticky parent", true, func(t *testing.T, b string) {
			mkdir(t, b+"/tmp", 0o1777, -1)
			mkdir(t, b+"/tmp/cache", 0o700, otherUID)
		}, "tmp/cache", "tmp/cache", "belongs to neither you"},
		{"a parent another uid's", true, func(t *testing.T, b string) { mkdir(t, b+"/home", 0o755, otherUID) }, "home/cache", "home", "belongs to neither you"},
		{"a link to another uid's", true, func(t *testing.T, b string) {
			mkdir(t, b+"/theirs", 0o755, otherUID)
			if err := os.Symlink(b+"/theirs", b+"/cache"); err != nil {
				t.Fatal(err)
			}
		}, "cache", "theirs", "belongs to neither you"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				requireRoot(t)
			}
			base := t.TempDir()
			tt.setup(t, base)
			got, err := secureDir(filepath.Join(base, tt.dir), 0o700, "the build cache", cacheFix)
			if tt.path == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got != filepath.Join(base, tt.dir) {
					t.Errorf("secureDir = %s, want %s", got, filepath.Join(base, tt.dir))
				}
				return
			}
			var ue *UnsafeDirError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUnsafeDir) {
				t.Fatalf("err = %v, want an *UnsafeDirError", err)
			}
			msg := err.Error()
			for _, want := range []string{filepath.Join(base, tt.path) + " (owner uid", tt.why, CacheEnv, "mode 0700"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not say %q:\n%s", want, msg)
				}
			}
			if tt.root && !strings.Contains(msg, "owner uid "+strconv.Itoa(otherUID)) {
				t.Errorf("the error does not name the owner, uid %d:\n%s", otherUID, msg)
			}
			if ue.Path != filepath.Join(base, tt.path) {
				t.Errorf("Path = %s, want %s", ue.Path, filepath.Join(base, tt.path))
			}
			if _, err := os.Lstat(filepath.Join(base, tt.dir)); err == nil && strings.HasPrefix(tt.dir, tt.path+"/") {
				t.Errorf("%s was made under the refused %s", tt.dir, tt.path)
			}
		})
	}
}

// setUmask sets the process's umask and returns the old one.
func setUmask(mask int) int { return syscall.Umask(mask) }

func TestSecureDirMakesPrivateDirectories(t *testing.T) {
	base := t.TempDir()
	old := setUmask(0o002) // a umask that would leave them group-writable
	defer setUmask(old)
	dir, err := secureDir(filepath.Join(base, "a", "b"), 0o700, "the build cache", cacheFix)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(base, "a"), dir} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (%v), want 0700", p, st.Mode().Perm(), err)
		}
	}
}
