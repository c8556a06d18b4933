package safedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// otherUID owns what another user planted; the cases that chown to it
// need root.
const otherUID = 60001

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

// link makes a symbolic link at name to target.
func link(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// TestChecks: Make, Parent and Private accept a directory only the caller
// and root can change, return it with links resolved, and otherwise
// name the directory at fault and why, as an *Error.
func TestChecks(t *testing.T) {
	checks := map[string]func(string) (string, error){
		"Make":    func(d string) (string, error) { return Make(d, 0o700) },
		"Parent":  Parent,
		"Private": Private,
	}
	tests := []struct {
		name  string
		check string
		root  bool                            // needs root (chown)
		setup func(t *testing.T, base string) // makes what is under base
		dir   string                          // asked for, under base
		real  string                          // returned, under base, when accepted
		path  string                          // the directory at fault, under base; "" when accepted
		why   string                          // what the refusal says
	}{
		{"Make: made", "Make", false, func(*testing.T, string) {}, "a/b", "a/b", "", ""},
		{"Make: a sticky parent", "Make", false, func(t *testing.T, b string) { mkdir(t, b+"/tmp", 0o1777, -1) }, "tmp/d", "tmp/d", "", ""},
		{"Make: the dir sticky", "Make", false, func(t *testing.T, b string) { mkdir(t, b+"/tmp", 0o1777, -1) }, "tmp", "", "tmp", "writable by others (the sticky bit"},
		{"Make: a group-writable parent", "Make", false, func(t *testing.T, b string) { mkdir(t, b+"/g", 0o775, -1) }, "g/d", "", "g", "writable by its group"},
		{"Parent: sticky", "Parent", false, func(t *testing.T, b string) { mkdir(t, b+"/tmp", 0o1777, -1) }, "tmp", "tmp", "", ""},
		{"Parent: a link to a sticky dir", "Parent", false, func(t *testing.T, b string) {
			mkdir(t, b+"/tmp", 0o1777, -1)
			link(t, b+"/tmp", b+"/l")
		}, "l", "tmp", "", ""},
		{"Parent: world-writable, not sticky", "Parent", false, func(t *testing.T, b string) { mkdir(t, b+"/w", 0o777, -1) }, "w", "", "w", "writable by others"},
		{"Parent: a link to another uid's sticky dir", "Parent", true, func(t *testing.T, b string) {
			mkdir(t, b+"/theirs", 0o1777, otherUID)
			link(t, b+"/theirs", b+"/l")
		}, "l", "", "theirs", "belongs to neither you"},
		{"Private: 0700", "Private", false, func(t *testing.T, b string) { mkdir(t, b+"/p", 0o700, -1) }, "p", "p", "", ""},
		{"Private: in a linked parent", "Private", false, func(t *testing.T, b string) {
			mkdir(t, b+"/real/p", 0o700, -1)
			link(t, b+"/real", b+"/l")
		}, "l/p", "real/p", "", ""},
		{"Private: 0710", "Private", false, func(t *testing.T, b string) { mkdir(t, b+"/p", 0o710, -1) }, "p", "", "p", "others may use it"},
		{"Private: a link", "Private", false, func(t *testing.T, b string) {
			mkdir(t, b+"/real", 0o700, -1)
			link(t, b+"/real", b+"/p")
		}, "p", "", "p", "symbolic link"},
		{"Private: a group-writable parent", "Private", false, func(t *testing.T, b string) {
			mkdir(t, b+"/g", 0o770, -1)
			mkdir(t, b+"/g/p", 0o700, -1)
		}, "g/p", "", "g", "writable by its group"},
		{"Private: another uid's", "Private", true, func(t *testing.T, b string) { mkdir(t, b+"/p", 0o700, otherUID) }, "p", "", "p", "belongs to another user"},
		{"Private: root's, for another caller", "Private", false, func(t *testing.T, b string) {
			if os.Geteuid() == 0 {
				t.Skip("root owns what it makes")
			}
		}, "/", "", "/", "belongs to another user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("needs root, to give files to another uid")
			}
			base, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			tt.setup(t, base)
			at := func(p string) string {
				if strings.HasPrefix(p, "/") {
					return p
				}
				return filepath.Join(base, p)
			}
			got, err := checks[tt.check](at(tt.dir))
			if tt.path == "" {
				if err != nil || got != at(tt.real) {
					t.Fatalf("%s(%s) = %s, %v; want %s", tt.check, tt.dir, got, err, at(tt.real))
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrUnsafe) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if e.Path != at(tt.path) || !strings.Contains(err.Error(), tt.why) || !strings.Contains(err.Error(), "(owner uid") {
				t.Errorf("err = %v; want it to name %s and say %q", err, at(tt.path), tt.why)
			}
		})
	}
}
