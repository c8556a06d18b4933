package guest

import (
	"os"
	"strings"
	"testing"
)

// UCX's ucx_info (Debian's ucx-utils), unmodified, on vrdma adapters through
// the guest library: UCX keeps an ibv device only if
// /dev/infiniband/<dev_name> is a character device it may open
// (docs/design/device-discovery.md), then opens its rc and ud transports.

const ucxUtils = "ucx-utils"

// requireDeviceNode makes /dev/infiniband/vrdma as the root daemon does at
// its start (the test's daemon is the package's, not the command's), or
// skips the test when it cannot.
func requireDeviceNode(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 && DeviceNodeMissing() {
		t.Skipf("%s is missing and only root can make it: run `sudo vrdma guest build --out DIR` once, or the test as root", DeviceNode)
	}
	if err := EnsureDeviceNode(); err != nil {
		t.Fatal(err)
	}
}

func TestToolUCXInfoListsTheAdapterAndItsVerbsTransports(t *testing.T) {
	requireTool(t, "ucx_info", ucxUtils)
	requireDeviceNode(t)
	h := newToolHost(t)
	name := h.devices(t, "")[0].Name
	out := h.run(t, "", "ucx_info", "-d")
	domains := map[string]bool{}
	transports := map[string]bool{} // "rc_verbs vrdma0:1"
	tl := ""
	for line := range strings.Lines(out) {
		key, val, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#")), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch strings.TrimSpace(key) {
		case "Memory domain":
			domains[val] = true
		case "Transport":
			tl = val
		case "Device":
			transports[tl+" "+val] = true
		}
	}
	if !domains[name] {
		t.Errorf("ucx_info -d shows the memory domains %v, want %s; it printed:\n%s", domains, name, out)
	}
	for _, tl := range []string{"rc_verbs", "ud_verbs"} {
		if !transports[tl+" "+name+":1"] {
			t.Errorf("ucx_info -d shows no %s on %s:1 (it shows %v)", tl, name, transports)
		}
	}
	if t.Failed() {
		t.Logf("ucx_info -d printed:\n%s", out)
	}
}
