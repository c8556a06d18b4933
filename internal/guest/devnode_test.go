package guest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestEnsureDeviceNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a device node needs root")
	}
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, path string)
		wantErr error
	}{
		{"missing: made, with its directory", func(*testing.T, string) {}, nil},
		{"there already: left alone", func(t *testing.T, path string) {
			if err := ensureDeviceNode(path); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"wrong mode: fixed", func(t *testing.T, path string) {
			if err := ensureDeviceNode(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"a file: refused, untouched", func(t *testing.T, path string) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, ErrDeviceNodeTaken},
		// Root mknods, then chmods by path: in a directory another
		// user may write, they swap the node for a link to a file of
		// root's between the two, and root makes that file 0666.
		{"its directory writable by others: refused, nothing made", func(t *testing.T, path string) {
			mkdirMode(t, filepath.Dir(path), 0o777)
		}, ErrDeviceNodeDirUnsafe},
		{"its directory writable by its group: refused, nothing made", func(t *testing.T, path string) {
			mkdirMode(t, filepath.Dir(path), 0o775)
		}, ErrDeviceNodeDirUnsafe},
		{"its directory another user's: refused, nothing made", func(t *testing.T, path string) {
			mkdirMode(t, filepath.Dir(path), 0o755)
			if err := os.Chown(filepath.Dir(path), 60001, 60001); err != nil {
				t.Fatal(err)
			}
		}, ErrDeviceNodeDirUnsafe},
		{"its directory a link: refused, nothing made", func(t *testing.T, path string) {
			target := filepath.Join(filepath.Dir(filepath.Dir(path)), "elsewhere")
			mkdirMode(t, target, 0o755)
			if err := os.Symlink(target, filepath.Dir(path)); err != nil {
				t.Fatal(err)
			}
		}, ErrDeviceNodeDirUnsafe},
		{"another device: refused", func(t *testing.T, path string) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(231, 192))); err != nil { // a real uverbs0's
				t.Fatal(err)
			}
		}, ErrDeviceNodeTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "infiniband", "vrdma")
			tc.prepare(t, path)
			err := ensureDeviceNode(path)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ensureDeviceNode: %v, want %v", err, tc.wantErr)
			}
			if errors.Is(tc.wantErr, ErrDeviceNodeDirUnsafe) {
				if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("ensureDeviceNode refused the directory but %s is there (%v)", path, err)
				}
			}
			if tc.wantErr != nil {
				return
			}
			var st unix.Stat_t
			if err := unix.Stat(path, &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 1 || unix.Minor(st.Rdev) != 3 || st.Mode&0o777 != 0o666 {
				t.Errorf("the node is mode %o, device %d:%d; want a character device 1:3 (/dev/null's), mode 0666",
					st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev))
			}
		})
	}
}

// mkdirMode makes dir with exactly mode, past the umask.
func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}
