package main

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/guest"
	"github.com/vrdma/vrdma/internal/verbs/verbsbuild"
)

// TestLinkAddVerbsWithoutDevice runs the real helper, built from the
// embedded sources, on this host: asking for a device rdma-core does not
// have is a clear error, and the daemon goes on serving.
func TestLinkAddVerbsWithoutDevice(t *testing.T) {
	t.Setenv(guest.CacheEnv, t.TempDir())
	sock := daemontest.StartWith(t, func(c *daemon.Config) { c.BuildVerbsHelper = verbsbuild.Build }).SocketPath()
	code, _, errs := vrdmaCmd(t, "link", "add", "hca0", "type", "verbs", "dev", "vrdmanodev0", "--socket", sock)
	if code == 1 && strings.Contains(errs, "cannot build the verbs helper") {
		t.Skipf("no compiler or rdma-core headers here: %s", errs)
	}
	if code != 1 || !strings.Contains(errs, "rdma-core has no device vrdmanodev0") || !strings.Contains(errs, "ibv_devices") {
		t.Fatalf("link add on a missing device: exit %d, stderr %q", code, errs)
	}
	if code, out, errs := vrdmaCmd(t, "link", "--socket", sock); code != 0 || out != "" {
		t.Fatalf("link show after the failed add: exit %d, %q, %q", code, out, errs)
	}
}

// TestPrintVerbsLink: `vrdma link show` prints a verbs link's device and
// port, then what ibv_devinfo -v would: link layer, state, MTU and each GID
// with its type.
func TestPrintVerbsLink(t *testing.T) {
	l := vrdma.LinkInfo{LinkSpec: vrdma.LinkSpec{Name: "hca0", Type: "verbs", Dev: "rxe0"}, State: "ACTIVE", PhysState: "LINK_UP", ActiveMTU: 3,
		Verbs: &vrdma.VerbsLinkInfo{Dev: "rxe0", Port: 1, Transport: "InfiniBand", LinkLayer: "Ethernet", PortState: "PORT_ACTIVE", FWVer: "0.0.0",
			GIDs: []vrdma.VerbsGID{{Index: 1, Type: "RoCE v2", GID: vrdma.GID(netip.MustParseAddr("::ffff:10.47.91.1").As16()), Netdev: "eth0"}}}}
	var b bytes.Buffer
	printLink(&b, l)
	want := "link hca0/1 state ACTIVE physical_state LINK_UP dev rxe0 port 1\n" +
		"    type verbs transport InfiniBand link_layer Ethernet port_state PORT_ACTIVE active_mtu 1024 lid 0 fw_ver 0.0.0\n" +
		"    gid 1 ::ffff:10.47.91.1 RoCE v2, eth0\n"
	if b.String() != want {
		t.Fatalf("printLink:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestPrintHostVerbsUplink: `vrdma host show` prints a verbs uplink with
// its device, link layer and each GID's type, as the switch recorded them.
func TestPrintHostVerbsUplink(t *testing.T) {
	h := vrdma.HostInfo{Name: "a", Uplinks: []vrdma.UplinkInfo{{Name: "hca0", Kind: "verbs", State: "up", MTU: 1024,
		GIDs: []string{"fe80::1", "::ffff:10.47.91.1"}, Device: "rxe0", LinkLayer: "Ethernet", GIDTypes: []string{"RoCE v2", "RoCE v2"}}}}
	var b bytes.Buffer
	printHost(&b, h)
	for _, want := range []string{
		"    uplink hca0 kind verbs state up mtu 1024 dev rxe0 link_layer Ethernet\n",
		"        gid 0 fe80::1 RoCE v2\n",
		"        gid 1 ::ffff:10.47.91.1 RoCE v2\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printHost lacks %q:\n%s", want, b.String())
		}
	}
}
