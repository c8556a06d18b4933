package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest"
	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// TestRunUCXInfoSeesTheAdapter: `vrdma run -- ucx_info -d` with no daemon
// running starts the user's own daemon, which (as root) makes the device
// node, and UCX, unmodified, lists the adapter with its verbs transports
// (docs/design/device-discovery.md).
func TestRunUCXInfoSeesTheAdapter(t *testing.T) {
	if _, err := exec.LookPath("ucx_info"); err != nil {
		t.Skip("ucx_info is not installed: `apt-get install ucx-utils` (Debian, Ubuntu) to run this test")
	}
	if os.Geteuid() != 0 && guest.DeviceNodeMissing() {
		t.Skipf("%s is missing and only root makes it: run the test as root", guest.DeviceNode)
	}
	lib := guesttest.Library(t)
	xdg := privateTempDir(t)
	st, out, errs := runChild(t, lib, []string{"XDG_RUNTIME_DIR=" + xdg}, "run", "--", "ucx_info", "-d")
	if st.ExitCode() != 0 {
		t.Fatalf("vrdma run -- ucx_info -d: exit %d\n%s\n%s", st.ExitCode(), out, errs)
	}
	for _, want := range []string{"Memory domain: vrdma0", "Transport: rc_verbs", "Transport: ud_verbs", "Device: vrdma0:1"} {
		if !strings.Contains(out, want) {
			t.Errorf("ucx_info -d under vrdma run does not show %q; it printed:\n%s", want, out)
		}
	}
	awaitGone(t, filepath.Join(xdg, "vrdma", userSocketName))
}
