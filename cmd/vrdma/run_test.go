package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/guest"
	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// fakeGuest makes vrdma run and vrdma guest take dir for the built guest
// library, or fail with err, for the test's duration.
func fakeGuest(t *testing.T, dir string, err error) {
	t.Helper()
	old := buildGuest
	buildGuest = func() (string, error) { return dir, err }
	t.Cleanup(func() { buildGuest = old })
}

// fakeLibDir returns a directory holding a stand-in libibverbs.so.1.
func fakeLibDir(t *testing.T, parent string) string {
	t.Helper()
	dir := filepath.Join(parent, "guest-0123")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, guest.SOName), []byte("not really a library\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRunPrintEnv(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		libDir  string
		oldPath string
		args    []string
		want    string
	}{
		{"alone", "/c/guest-1", "", nil,
			"export LD_LIBRARY_PATH=/c/guest-1\n"},
		{"before the old path", "/c/guest-1", "/a:/b", nil,
			"export LD_LIBRARY_PATH=/c/guest-1:/a:/b\n"},
		{"once", "/c/guest-1", "/a:/c/guest-1::/b", nil,
			"export LD_LIBRARY_PATH=/c/guest-1:/a:/b\n"},
		{"socket and instance", "/c/guest-1", "", []string{"--socket", "/run/x.sock", "--instance", "vm1"},
			"export LD_LIBRARY_PATH=/c/guest-1\nexport VRDMA_SOCKET=/run/x.sock\nexport VRDMA_INSTANCE=vm1\n"},
		{"relative socket made absolute", "/c/guest-1", "", []string{"--socket", "s.sock"},
			"export LD_LIBRARY_PATH=/c/guest-1\nexport VRDMA_SOCKET=" + filepath.Join(cwd, "s.sock") + "\n"},
		{"quoted for sh", "/home/o'brien/my cache/guest-1", "", []string{"--instance", "a b"},
			"export LD_LIBRARY_PATH='/home/o'\\''brien/my cache/guest-1'\nexport VRDMA_INSTANCE='a b'\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeGuest(t, tt.libDir, nil)
			t.Setenv("LD_LIBRARY_PATH", tt.oldPath)
			code, out, errs := vrdmaCmd(t, append(append([]string{"run"}, tt.args...), "--print-env")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if out != tt.want {
				t.Errorf("printed\n%s\nwant\n%s", out, tt.want)
			}
		})
	}
}

// TestRunPrintEnvEvaluates: what --print-env prints, sh reads back as the
// values vrdma run would set.
func TestRunPrintEnvEvaluates(t *testing.T) {
	libDir := "/tmp/it's a \"cache\"/$HOME/guest-1"
	fakeGuest(t, libDir, nil)
	t.Setenv("LD_LIBRARY_PATH", "/old")
	code, out, errs := vrdmaCmd(t, "run", "--print-env", "--instance", "vm 1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	got, err := exec.Command("sh", "-c", `eval "$1"; printf '%s\n%s\n' "$LD_LIBRARY_PATH" "$VRDMA_INSTANCE"`, "sh", out).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	if want := libDir + ":/old\nvm 1\n"; string(got) != want {
		t.Errorf("sh read %q, want %q", got, want)
	}
}

// childEnv is the environment of a vrdma process that a test runs: no
// daemon answers at the default socket unless the test says so, the
// user's daemon (which vrdma run starts then) lives in a private
// directory of the test's and stops a second after its last program.
func childEnv(t *testing.T, libDir string) []string {
	noDaemon := filepath.Join(t.TempDir(), "absent.sock")
	return append(os.Environ(), cliEnv+"=1", guestLibEnv+"="+libDir, defaultSocketEnv+"="+noDaemon, "VRDMA_SOCKET=",
		"XDG_RUNTIME_DIR="+privateTempDir(t), userDaemonIdleEnv+"=1s")
}

// privateTempDir returns a temporary directory of the test's with mode
// 0700, as a runtime directory is.
func privateTempDir(t *testing.T) string {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runChild runs the test binary as `vrdma args...` with libDir as its
// guest library and returns its state and output.
func runChild(t *testing.T, libDir string, env []string, args ...string) (*os.ProcessState, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(childEnv(t, libDir), env...)
	var out, errs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState, out.String(), errs.String()
}

func TestRunExecsTheCommand(t *testing.T) {
	libDir := fakeLibDir(t, t.TempDir())
	script := `printf '%s\n' "$LD_LIBRARY_PATH" "$VRDMA_INSTANCE" "$VRDMA_SOCKET"; exit 3`
	st, out, errs := runChild(t, libDir, []string{"LD_LIBRARY_PATH=/old"},
		"run", "--instance", "vm9", "--socket", "/run/v.sock", "--", "sh", "-c", script)
	if st.ExitCode() != 3 {
		t.Errorf("exit status %d, want the command's 3 (stderr %q)", st.ExitCode(), errs)
	}
	if want := libDir + ":/old\nvm9\n/run/v.sock\n"; out != want {
		t.Errorf("the command saw\n%s\nwant\n%s", out, want)
	}
}

// TestRunCommandsSignalIsItsOwn: a command killed by a signal kills vrdma
// run with that signal, on a running daemon and on the user's own daemon
// that vrdma run starts (vrdma run is the command either way): a crash
// (SIGSEGV, SIGABRT) too.
func TestRunCommandsSignalIsItsOwn(t *testing.T) {
	// No core files from the commands, nor from vrdma dying as they did.
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_CORE, &old); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{Cur: 0, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_CORE, &old) })
	sock := daemontest.Start(t)
	libDir := fakeLibDir(t, t.TempDir())
	for _, daemon := range []struct {
		name string
		env  []string
	}{
		{"running daemon", []string{defaultSocketEnv + "=" + sock}},
		{"user's daemon", nil},
	} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGKILL, syscall.SIGSEGV,
			syscall.SIGABRT, syscall.SIGQUIT, syscall.SIGBUS, syscall.SIGPIPE, syscall.SIGUSR1} {
			t.Run(daemon.name+"/"+sig.String(), func(t *testing.T) {
				st, _, errs := runChild(t, libDir, daemon.env, "run", "sh", "-c", fmt.Sprintf("kill -%d $$", int(sig)))
				ws, ok := st.Sys().(syscall.WaitStatus)
				if !ok || !ws.Signaled() || ws.Signal() != sig {
					t.Errorf("process ended %v, want killed by %v as the command was (stderr %q)", st, sig, errs)
				}
			})
		}
	}
}

func TestRunBadCommandLines(t *testing.T) {
	tests := []struct {
		name     string
		buildErr error
		args     []string
		code     int
		want     string
	}{
		{"no command", nil, []string{"run"}, 2, "name the command to run"},
		{"no command after --", nil, []string{"run", "--instance", "x", "--"}, 2, "name the command to run"},
		{"print-env and a command", nil, []string{"run", "--print-env", "ibv_devinfo"}, 2, "give one or the other"},
		{"unknown flag", nil, []string{"run", "--frob", "ibv_devinfo"}, 2, "flag provided but not defined: -frob"},
		{"not installed", nil, []string{"run", "ibv_vrdma_no_such_tool"}, 1, "apt-get install ibverbs-utils"},
		{"not installed, perftest", nil, []string{"run", "ib_vrdma_no_such_test"}, 1, "apt-get install perftest"},
		{"no compiler", &guest.MissingToolsError{Missing: []string{"a C compiler"}, Packages: []string{"gcc", "libibverbs-dev"}},
			[]string{"run", "true"}, 1, "apt-get install gcc libibverbs-dev"},
		{"guest path, no compiler", &guest.MissingToolsError{Missing: []string{"a C compiler"}, Packages: []string{"gcc"}},
			[]string{"guest", "path"}, 1, "apt-get install gcc"},
		{"guest alone", nil, []string{"guest"}, 2, "name a command"},
		{"guest frob", nil, []string{"guest", "frob"}, 2, `unknown guest command "frob"`},
		{"guest path --out", nil, []string{"guest", "path", "--out", "/x"}, 2, "guest build --out /x"},
		{"guest build with an argument", nil, []string{"guest", "build", "x"}, 2, "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeGuest(t, fakeLibDir(t, t.TempDir()), tt.buildErr)
			code, _, errs := vrdmaCmd(t, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errs, tt.code, tt.want)
			}
		})
	}
}

func TestGuestBuildAndPath(t *testing.T) {
	libDir := fakeLibDir(t, t.TempDir())
	fakeGuest(t, libDir, nil)
	for _, sub := range []string{"build", "path"} {
		code, out, errs := vrdmaCmd(t, "guest", sub)
		if code != 0 || out != libDir+"\n" {
			t.Errorf("guest %s: exit %d, printed %q (stderr %q); want %s", sub, code, out, errs, libDir)
		}
	}
	// --out installs only a build that matches its manifest: a real one.
	built, err := guest.Build(t.TempDir())
	if err != nil {
		t.Skipf("cannot build the guest library here: %v", err)
	}
	fakeGuest(t, built, nil)
	dest := filepath.Join(t.TempDir(), "lib", "vrdma")
	code, out, errs := vrdmaCmd(t, "guest", "build", "--out", dest)
	if code != 0 || out != dest+"\n" {
		t.Fatalf("guest build --out: exit %d, printed %q (stderr %q); want %s", code, out, errs, dest)
	}
	want, err := os.ReadFile(filepath.Join(built, guest.SOName))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, guest.SOName)); err != nil || string(b) != string(want) {
		t.Errorf("%s/%s: %v, want the built library's copy", dest, guest.SOName, err)
	}
	if target, err := os.Readlink(filepath.Join(dest, guest.LinkName)); err != nil || target != guest.SOName {
		t.Errorf("%s -> %q (%v), want %s", guest.LinkName, target, err, guest.SOName)
	}
}

// TestRunBuildsTheGuestLibrary: the real build, into the cache
// VRDMA_GUEST_CACHE names, is what LD_LIBRARY_PATH points at.
func TestRunBuildsTheGuestLibrary(t *testing.T) {
	if cfiles, _ := fs.Glob(guest.Sources(), "*.c"); len(cfiles) == 0 {
		t.Skip("the guest library has no C sources yet")
	}
	cache := t.TempDir()
	t.Setenv(guest.CacheEnv, cache)
	t.Setenv("LD_LIBRARY_PATH", "")
	code, out, errs := vrdmaCmd(t, "run", "--print-env")
	if code != 0 && strings.Contains(errs, "apt-get install") {
		t.Skipf("cannot build the guest library here: %s", errs)
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(out), "export LD_LIBRARY_PATH=")
	if !ok || filepath.Dir(dir) != cache {
		t.Fatalf("printed %q, want LD_LIBRARY_PATH in %s", out, cache)
	}
	if _, err := os.Stat(filepath.Join(dir, guest.SOName)); err != nil {
		t.Errorf("LD_LIBRARY_PATH names a directory without the library: %v", err)
	}
}

// TestRunStartsADaemonWhenNoneAnswers: with no daemon at the default socket
// and none named, the command runs on the user's own daemon, on a socket in
// a directory that is the user's alone, which it is given; vrdma says so,
// ends with the command's status, and the daemon stops once idle.
func TestRunStartsADaemonWhenNoneAnswers(t *testing.T) {
	libDir := fakeLibDir(t, t.TempDir())
	xdg := privateTempDir(t)
	script := `test -S "$VRDMA_SOCKET" && printf '%s\n' "$VRDMA_SOCKET"; exit 4`
	st, out, errs := runChild(t, libDir, []string{"XDG_RUNTIME_DIR=" + xdg}, "run", "--", "sh", "-c", script)
	if st.ExitCode() != 4 {
		t.Errorf("exit status %d, want the command's 4 (stderr %q)", st.ExitCode(), errs)
	}
	sock := strings.TrimSpace(out)
	if want := filepath.Join(xdg, "vrdma", userSocketName); sock != want {
		t.Errorf("the command saw VRDMA_SOCKET %q, want the user's daemon's live socket %s", sock, want)
	}
	if !strings.Contains(errs, "no daemon answers at") || !strings.Contains(errs, "your own daemon") {
		t.Errorf("stderr %q does not say the command runs on the user's own daemon", errs)
	}
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the daemon's directory: %v %v, want mode 0700", fi, err)
	}
	awaitGone(t, sock)
}

// awaitGone waits until the daemon at sock has stopped, idle, and removed
// its socket; 30 s is a hang guard.
func awaitGone(t *testing.T, sock string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for daemonAnswers(sock) || fileExists(sock) {
		if time.Now().After(deadline) {
			t.Fatalf("the user's daemon at %s still runs 30 s after its last program ended", sock)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestRunUsesTheDaemonThatAnswers: a daemon at the default socket is used
// as it is, with no embedded one and no notice.
func TestRunUsesTheDaemonThatAnswers(t *testing.T) {
	sock := daemontest.Start(t)
	libDir := fakeLibDir(t, t.TempDir())
	st, out, errs := runChild(t, libDir, []string{defaultSocketEnv + "=" + sock}, "run", "--", "sh", "-c", `printf '%s\n' "$VRDMA_SOCKET"`)
	if st.ExitCode() != 0 || strings.TrimSpace(out) != "" || strings.Contains(errs, "no daemon answers") {
		t.Errorf("exit %d, VRDMA_SOCKET %q, stderr %q: want the running daemon used as is (no VRDMA_SOCKET set, no notice)", st.ExitCode(), out, errs)
	}
}

// TestRunDevicesOnAFreshMachine: `vrdma run -- ibv_devices` with no daemon
// running lists the user's daemon's vrdma0 through the real library.
func TestRunDevicesOnAFreshMachine(t *testing.T) {
	if _, err := exec.LookPath("ibv_devices"); err != nil {
		t.Skip("ibv_devices is missing: apt-get install ibverbs-utils")
	}
	lib := guesttest.Library(t)
	st, out, errs := runChild(t, lib, nil, "run", "--", "ibv_devices")
	if st.ExitCode() != 0 || !strings.Contains(out, "vrdma0") {
		t.Errorf("exit %d, output %q, stderr %q: want vrdma0 listed", st.ExitCode(), out, errs)
	}
}
