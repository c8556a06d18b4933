// Package daemontest starts a real host daemon inside a test process, on a
// socket in the test's temporary directory, so tests of the library, the
// tools and the engine run against the same code a deployment runs.
//
//	sock := daemontest.Start(t)
//	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: sock})
package daemontest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vrdma/vrdma/internal/daemon"
)

// Start runs a daemon until the test ends and returns its socket path.
func Start(t testing.TB) string {
	t.Helper()
	d := StartDaemon(t)
	return d.SocketPath()
}

// StartDaemon is Start returning the daemon itself.
func StartDaemon(t testing.TB) *daemon.Daemon {
	t.Helper()
	return StartWith(t, nil)
}

// StartWith is StartDaemon with a configuration that edit, if not nil,
// changes (limits, an admin group, ...) after the socket and state
// directory are filled in.
func StartWith(t testing.TB, edit func(*daemon.Config)) *daemon.Daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "vrdma-test-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := daemon.Config{SocketPath: filepath.Join(dir, "vrdma.sock"), StateDir: filepath.Join(dir, "state"), HostName: "test"}
	if edit != nil {
		edit(&cfg)
	}
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve()
	t.Cleanup(func() {
		d.Close()
		os.RemoveAll(dir)
	})
	return d
}
