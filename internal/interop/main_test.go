package interop

import (
	"fmt"
	"os"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/proctest"
)

// TestMain gives the programs the tests run a private XDG_RUNTIME_DIR, so
// that the guest library's sysfs trees go there and are removed at the
// end, and the verbs kits a directory they are built into once; it stops
// the guests the tests shared and removes the guest library they built at
// the end.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vrdma-interop-kits-")
	if err == nil {
		kits.dir = dir
	}
	code := proctest.RunInPrivateRuntimeDir(m)
	if err := stopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	guesttest.RemoveLibrary()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}
