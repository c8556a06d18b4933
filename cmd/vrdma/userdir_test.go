package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/safedir"
)

// TestUserDaemonDirIsYoursAlone: the directory of the user's own daemon is
// made 0700 in a runtime directory of the user's, and refused, saying why,
// when it (or the runtime directory) is a link, not a directory, another
// user's, or open to others: a socket there could be someone else's.
func TestUserDaemonDirIsYoursAlone(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, xdg string) // xdg: 0700, empty
		root  bool                           // needs root (chown)
		want  string                         // "" = accepted
	}{
		{"made", func(*testing.T, string) {}, false, ""},
		{"already there", func(t *testing.T, xdg string) { mkdir(t, filepath.Join(xdg, "vrdma"), 0o700) }, false, ""},
		{"open to others", func(t *testing.T, xdg string) { mkdir(t, filepath.Join(xdg, "vrdma"), 0o777) }, false, "others may use it"},
		{"group may enter", func(t *testing.T, xdg string) { mkdir(t, filepath.Join(xdg, "vrdma"), 0o710) }, false, "others may use it"},
		{"runtime directory open", func(t *testing.T, xdg string) { chmod(t, xdg, 0o755) }, false, "XDG_RUNTIME_DIR"},
		{"a link", func(t *testing.T, xdg string) {
			other := t.TempDir()
			chmod(t, other, 0o700)
			if err := os.Symlink(other, filepath.Join(xdg, "vrdma")); err != nil {
				t.Fatal(err)
			}
		}, false, "symbolic link"},
		{"a file", func(t *testing.T, xdg string) {
			if err := os.WriteFile(filepath.Join(xdg, "vrdma"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false, "not a directory"},
		{"another user's", func(t *testing.T, xdg string) {
			dir := filepath.Join(xdg, "vrdma")
			mkdir(t, dir, 0o700)
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, true, "belongs to another user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("needs root to give a directory to another user")
			}
			xdg := t.TempDir()
			chmod(t, xdg, 0o700)
			tt.setup(t, xdg)
			t.Setenv("XDG_RUNTIME_DIR", xdg)
			dir, err := userDaemonDir()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				fi, err := os.Lstat(dir)
				if dir != filepath.Join(xdg, "vrdma") || err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
					t.Errorf("dir %s (%v, %v), want %s/vrdma, a directory with mode 0700", dir, fi, err, xdg)
				}
				return
			}
			if !errors.Is(err, errNotPrivate) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("dir %q, error %v; want errNotPrivate saying %q", dir, err, tt.want)
			}
		})
	}
}

// TestRunRefusesASharedDaemonDir: vrdma run neither starts nor uses a
// daemon in a directory others may use, and says what to do.
func TestRunRefusesASharedDaemonDir(t *testing.T) {
	xdg := privateTempDir(t)
	mkdir(t, filepath.Join(xdg, "vrdma"), 0o777)
	st, _, errs := runChild(t, fakeLibDir(t, t.TempDir()), []string{"XDG_RUNTIME_DIR=" + xdg}, "run", "--", "true")
	if st.ExitCode() != 1 || !strings.Contains(errs, "not private to you") || !strings.Contains(errs, "XDG_RUNTIME_DIR") {
		t.Errorf("exit %d, stderr %q; want 1 and a refusal that says why and what to do", st.ExitCode(), errs)
	}
	if fileExists(filepath.Join(xdg, "vrdma", userSocketName)) {
		t.Error("a daemon serves in the shared directory")
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, mode) // past the umask
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestUserDaemonsLookLikeNoOther: two users' own daemons on one host (two
// sockets here) show their adapters under GUIDs and LIDs that differ,
// and unlike an ordinary daemon's LID 1: a program handed the other's
// address finds no port of its own there.
func TestUserDaemonsLookLikeNoOther(t *testing.T) {
	var seen []string
	for i := range 2 {
		sock := filepath.Join(privateTempDir(t), userSocketName)
		if code, out, errs := vrdmaCmdChild(t, "daemon", "--user", "--socket", sock, "--idle-exit", "1s", "--detach"); code != 0 {
			t.Fatalf("daemon %d: exit %d: %s%s", i, code, out, errs)
		}
		code, out, errs := vrdmaCmd(t, "devinfo", "--socket", sock)
		if code != 0 {
			t.Fatalf("devinfo: exit %d: %s", code, errs)
		}
		guid := regexp.MustCompile(`node_guid:\s+(\S+)`).FindStringSubmatch(out)
		lid := regexp.MustCompile(`port_lid:\s+(\d+)`).FindStringSubmatch(out)
		if guid == nil || lid == nil || lid[1] == "1" {
			t.Fatalf("devinfo shows no GUID, or LID 1:\n%s", out)
		}
		seen = append(seen, guid[1], lid[1])
		t.Cleanup(func() { awaitGone(t, sock) })
	}
	if seen[0] == seen[2] || seen[1] == seen[3] {
		t.Errorf("two users' daemons: GUIDs %s and %s, LIDs %s and %s; want both different", seen[0], seen[2], seen[1], seen[3])
	}
}

// vrdmaCmdChild runs the test binary as `vrdma args...` and returns its
// exit code and output.
func vrdmaCmdChild(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	var out, errs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errs.String()
}

// TestUserDaemonDirParents: the directories above the user's daemon
// directory are checked too, links resolved: a runtime directory in a
// directory that others may write, or a TMPDIR that is a link to another
// user's directory, is refused (another user could rename the daemon's
// directory away and put their own in its place), saying which directory
// and why.
func TestUserDaemonDirParents(t *testing.T) {
	tests := []struct {
		name  string
		root  bool                                              // needs root (chown)
		setup func(t *testing.T, base string) (xdg, tmp string) // under base, 0700
		want  string                                            // "" = accepted
		dir   string                                            // the directory returned, under base
	}{
		{"XDG_RUNTIME_DIR in a group-writable directory", false, func(t *testing.T, b string) (string, string) {
			mkdir(t, filepath.Join(b, "shared"), 0o770)
			mkdir(t, filepath.Join(b, "shared", "xdg"), 0o700)
			return filepath.Join(b, "shared", "xdg"), ""
		}, filepath.Join("shared") + " (owner uid", ""},
		{"TMPDIR sticky", false, func(t *testing.T, b string) (string, string) {
			mkdir(t, filepath.Join(b, "tmp"), 0o777|os.ModeSticky)
			return "", filepath.Join(b, "tmp")
		}, "", "tmp/vrdma-" + strconv.Itoa(os.Geteuid())},
		{"TMPDIR a link to a sticky directory of yours", false, func(t *testing.T, b string) (string, string) {
			mkdir(t, filepath.Join(b, "tmp"), 0o777|os.ModeSticky)
			symlink(t, filepath.Join(b, "tmp"), filepath.Join(b, "l"))
			return "", filepath.Join(b, "l")
		}, "", "tmp/vrdma-" + strconv.Itoa(os.Geteuid())},
		{"TMPDIR writable by others, not sticky", false, func(t *testing.T, b string) (string, string) {
			mkdir(t, filepath.Join(b, "tmp"), 0o777)
			return "", filepath.Join(b, "tmp")
		}, "tmp (owner uid", ""},
		{"TMPDIR a link to another user's sticky directory", true, func(t *testing.T, b string) (string, string) {
			theirs := filepath.Join(b, "theirs")
			mkdir(t, theirs, 0o777|os.ModeSticky)
			if err := os.Chown(theirs, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			symlink(t, theirs, filepath.Join(b, "l"))
			return "", filepath.Join(b, "l")
		}, "theirs (owner uid 65534", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("needs root to give a directory to another user")
			}
			base, err := filepath.EvalSymlinks(privateTempDir(t))
			if err != nil {
				t.Fatal(err)
			}
			xdg, tmp := tt.setup(t, base)
			t.Setenv("XDG_RUNTIME_DIR", xdg)
			t.Setenv("TMPDIR", tmp)
			old := runUserDir
			runUserDir = filepath.Join(base, "no-run-user") // not there: TMPDIR is used
			t.Cleanup(func() { runUserDir = old })
			dir, err := userDaemonDir()
			if tt.want == "" {
				if err != nil || dir != filepath.Join(base, tt.dir) {
					t.Fatalf("dir %q, error %v; want %s", dir, err, filepath.Join(base, tt.dir))
				}
				return
			}
			if !errors.Is(err, errNotPrivate) || !errors.Is(err, safedir.ErrUnsafe) || !strings.Contains(err.Error(), filepath.Join(base, tt.want)) {
				t.Errorf("dir %q, error %v; want errNotPrivate naming %s", dir, err, filepath.Join(base, tt.want))
			}
		})
	}
}

func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}
