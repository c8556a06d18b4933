package itest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// publicDaemon starts a daemon whose socket any user may use.
func publicDaemon(t *testing.T) string { return publicDaemonWith(t, nil) }

// publicDaemonWith is publicDaemon with a configuration edit changes.
func publicDaemonWith(t *testing.T, edit func(*daemon.Config)) string {
	sock := daemontest.StartWith(t, edit).SocketPath()
	if err := os.Chmod(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	return sock
}

// asNobody runs cmd as uid/gid 65534, without root's capabilities.
func asNobody(t *testing.T, cmd *exec.Cmd) { t.Helper(); asUser(t, cmd, 65534, 65534) }

// asUser runs cmd as uid and gid, without root's capabilities. The test
// binary sits in a directory only root may enter, so it runs a copy.
func asUser(t *testing.T, cmd *exec.Cmd, uid, gid uint32) {
	t.Helper()
	dir, err := os.MkdirTemp("", "vrdma-itest-") // t.TempDir's parent is private
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, "itest-client")
	if err := os.WriteFile(copyPath, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd.Path = copyPath
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
}
