package stacks

import (
	"os"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/proctest"
)

// TestMain gives the programs the tests run a private XDG_RUNTIME_DIR, so
// that the guest library's sysfs trees go there and are removed at the
// end, and removes the guest library the tests built.
func TestMain(m *testing.M) {
	code := proctest.RunInPrivateRuntimeDir(m)
	guesttest.RemoveLibrary()
	os.Exit(code)
}
