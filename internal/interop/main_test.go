package interop

import (
	"os"
	"testing"

	"github.com/vrdma/vrdma/internal/proctest"
)

// TestMain gives the programs the tests run a private XDG_RUNTIME_DIR, so
// that the guest library's sysfs trees go there and are removed at the end.
func TestMain(m *testing.M) { os.Exit(proctest.RunInPrivateRuntimeDir(m)) }
