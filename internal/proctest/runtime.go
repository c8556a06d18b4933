package proctest

import (
	"fmt"
	"os"
	"testing"
)

// RunInPrivateRuntimeDir runs a package's tests with XDG_RUNTIME_DIR set to
// a directory of their own (mode 0700), removed when they end, and returns
// m.Run's code. The guest library keeps its sysfs tree for a daemon's
// socket there (internal/guest/csrc/sysfs.c): every test daemon has a
// socket of its own, so without this each one would leave a tree in /tmp.
func RunInPrivateRuntimeDir(m *testing.M) int {
	dir, err := os.MkdirTemp("", "vrdma-test-runtime-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "proctest: a private XDG_RUNTIME_DIR: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Setenv("XDG_RUNTIME_DIR", dir); err != nil {
		fmt.Fprintf(os.Stderr, "proctest: %v\n", err)
		return 1
	}
	return m.Run()
}
