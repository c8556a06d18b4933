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
	"github.com/vrdma/vrdma/switchview"
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
	h := switchview.Host{Name: "a", Uplinks: []switchview.Uplink{{Name: "hca0", Kind: "verbs", State: "up", MTU: 1024,
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

// TestPrintHostVerbsKinds: `vrdma host show` prints what path selection
// reads of a verbs uplink: the transport (iWARP for siw), an InfiniBand
// port's LID, SM LID and subnet prefix, a RoCE netdev's IP subnets, the
// device's limits, and whether the daemon carries QPs on it.
func TestPrintHostVerbsKinds(t *testing.T) {
	tests := []struct {
		name string
		u    switchview.Uplink
		want string
	}{
		{"InfiniBand", switchview.Uplink{Name: "ib0", Kind: "verbs", State: "up", MTU: 4096, Device: "mlx5_0", LinkLayer: "InfiniBand", Transport: "InfiniBand",
			LID: 3, SMLID: 1, SubnetPrefix: "fe80:0000:0000:0000", Caps: &switchview.VerbsCaps{Atomic: "hca", MaxSGE: 30, MaxQPWR: 32768, MaxInline: 512}, CarriesQPs: true, Carries: []string{"RC QPs", "atomics"}},
			"    uplink ib0 kind verbs state up mtu 4096 dev mlx5_0 link_layer InfiniBand\n" +
				"        transport InfiniBand lid 3 sm_lid 1 subnet_prefix fe80:0000:0000:0000\n" +
				"        atomic hca max_sge 30 max_qp_wr 32768 max_inline 512\n" +
				"        carries_qps yes, for instances bound to it: RC QPs, atomics\n"},
		{"siw", switchview.Uplink{Name: "iw0", Kind: "verbs", State: "up", MTU: 1024, Device: "siw0", LinkLayer: "Ethernet", Transport: "iWARP",
			Subnets: []string{"10.47.91.0/24"}, Caps: &switchview.VerbsCaps{Atomic: "none", MaxSGE: 6, MaxQPWR: 1024}},
			"    uplink iw0 kind verbs state up mtu 1024 dev siw0 link_layer Ethernet\n" +
				"        transport iWARP subnets 10.47.91.0/24\n" +
				"        atomic none max_sge 6 max_qp_wr 1024 max_inline unknown\n" +
				"        carries_qps no (its daemon cannot carry QPs on a device yet: paths to the host take software RoCEv2 or the TCP channel)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printHost(&b, switchview.Host{Name: "a", Uplinks: []switchview.Uplink{tt.u}, Path: "memcpy: same host a"})
			if !strings.Contains(b.String(), tt.want) {
				t.Errorf("printHost:\n%s\nlacks\n%s", b.String(), tt.want)
			}
		})
	}
}

// TestPrintHostBound: `vrdma host show` prints, under a host's path (that
// of unbound instances), how instances bound to each verbs uplink of this
// host reach the host's bound and unbound instances.
func TestPrintHostBound(t *testing.T) {
	var b bytes.Buffer
	printHost(&b, switchview.Host{Name: "b", Path: "tcp: neither host a nor host b has an RDMA uplink on port group default",
		Bound: []switchview.BoundPath{{Uplink: "hca0", ToBound: "verbs: an instance on host a is bound to verbs uplink hca0", ToUnbound: "none: the TCP channel cannot reach a device's QPs"}}})
	for _, want := range []string{
		"    path tcp: neither host a nor host b has an RDMA uplink on port group default\n" +
			"    bound to hca0: to bound instances verbs: an instance on host a is bound to verbs uplink hca0\n" +
			"    bound to hca0: to unbound instances none: the TCP channel cannot reach a device's QPs\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printHost:\n%s\nlacks\n%s", b.String(), want)
		}
	}
}

// TestPathRequestFlags: `vrdma path` takes what the QPs ask (--ud, --srq,
// --atomics, --inline, --sge, --mtu), refuses values no QP could ask
// before calling the daemon, and the daemon refuses them too (a caller of
// the API); on one host the path stays memcpy whatever is asked.
func TestPathRequestFlags(t *testing.T) {
	sock := startSwitchDaemon(t)
	mustRun(t, "vm", "create", "a", "--socket", sock)
	mustRun(t, "vm", "create", "b", "--socket", sock)
	out := mustRun(t, "path", "a", "b", "--ud", "--srq", "--atomics", "--inline", "256", "--sge", "8", "--mtu", "4096", "--socket", sock)
	if out != "memcpy: same host h1\n" {
		t.Errorf("path with a request on one host: %q", out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--mtu", "1500"}, "--mtu 1500 is not an RDMA path MTU: give 256, 512, 1024, 2048 or 4096"},
		{[]string{"--sge", "-1"}, "--sge -1"},
		{[]string{"--inline", "-5"}, "--inline -5"},
	} {
		code, _, errs := vrdmaCmd(t, append([]string{"path", "a", "b", "--socket", sock}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("path %q: exit %d, %q; want 2 and %q", tt.args, code, errs, tt.want)
		}
	}
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	for _, tt := range []struct {
		req  switchview.PathRequest
		want string
	}{
		{switchview.PathRequest{MTU: 1500}, "mtu 1500 is not an RDMA path MTU"},
		{switchview.PathRequest{MaxSGE: 1 << 20}, "sge 1048576: give the SGEs per WR"},
		{switchview.PathRequest{MaxInline: -1}, "inline -1"},
	} {
		if _, err := adm.PathFor("a", "b", tt.req); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("PathFor %+v: %v; want %q", tt.req, err, tt.want)
		}
	}
}
