package guest

import (
	"context"
	"net/netip"
	"os"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/netns"
)

// TestRdmacmLoopbackBindLeavesNoDevice runs rdmacm_test's loopback case
// in a network namespace whose interface has the adapter's first GID as
// its address, as every RoCE GID is an interface's address on the kernel:
// there a bind to 127.0.0.1 or ::1 must leave the id without a device, as
// the kernel's rdma_cm takes loopback as the wildcard. It bound the id to
// the first adapter at once, and libfabric's verbs provider then
// published 127.0.0.1 for every rank of an Open MPI job between hosts.
func TestRdmacmLoopbackBindLeavesNoDevice(t *testing.T) {
	netns.Require(t)
	cc := requireToolchain(t)
	bin := buildCTest(t, cc, append(append([]string(nil), libFlags...), sanitizeFlags...), "rdmacm_test.c")
	sock := daemontest.Start(t)
	devs, err := vrdma.Devices(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) == 0 || len(devs[0].GIDs) == 0 {
		t.Fatalf("the daemon's adapters: %+v, want one with a GID", devs)
	}
	gid := netip.AddrFrom16(devs[0].GIDs[0])
	h := netns.New(t, 1).Hosts[0]
	h.Run(t, "ip", "-6", "addr", "add", gid.String()+"/128", "dev", h.Iface, "nodad")

	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := h.Command(ctx, bin, "loopback")
	cmd.Env = append(os.Environ(), sanitizeEnv...)
	cmd.Env = append(cmd.Env, "VRDMA_SOCKET="+sock, "VRDMA_INSTANCE=", "XDG_RUNTIME_DIR="+runtimeDir(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rdmacm_test loopback in %s (its %s has %s): %v\n%s", h.NS, h.Iface, gid, err, out)
	}
	t.Logf("%s", out)
}
