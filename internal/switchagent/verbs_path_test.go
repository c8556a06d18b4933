package switchagent

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pathsel"
)

// TestVerbsPorts: path selection reads a host record's verbs uplinks that
// are up as ports of their kind (RoCE, InfiniBand, iWARP), with their RoCE
// v2 GIDs, routable RoCE v1 GIDs and IP subnets, IB LIDs and subnet, their
// device's limits and whether the daemon carries QPs on them.
func TestVerbsPorts(t *testing.T) {
	mlx := fabric.Uplink{Name: "hca0", Kind: fabric.UplinkVerbs, State: fabric.UplinkUp, Device: "mlx5_0", LinkLayer: "Ethernet", Transport: "InfiniBand", MTU: 1024,
		GIDs: []string{"fe80::1", "fe80::1", "::ffff:10.1.2.3", "::ffff:10.1.2.3"}, GIDTypes: []string{"RoCE v1", "RoCE v2", "RoCE v1", "RoCE v2"},
		Subnets: []string{"10.1.2.0/24"}, Caps: &fabric.VerbsCaps{Atomic: fabric.AtomicGlobal, MaxSGE: 30, MaxQPWR: 32768, MaxInline: 220}, CarriesQPs: true}
	ib := fabric.Uplink{Name: "ib0", Kind: fabric.UplinkVerbs, State: fabric.UplinkUp, Device: "mlx5_1", LinkLayer: "InfiniBand", Transport: "InfiniBand", MTU: 4096,
		LID: 3, SMLID: 1, SubnetPrefix: "fe80:0000:0000:0000", GIDs: []string{"fe80::2"}, GIDTypes: []string{"IB"}}
	siw := fabric.Uplink{Name: "iw0", Kind: fabric.UplinkVerbs, State: fabric.UplinkUp, Device: "siw0", LinkLayer: "Ethernet", Transport: "iWARP", MTU: 1024,
		Caps: &fabric.VerbsCaps{Atomic: fabric.AtomicNone, MaxSGE: 6, MaxQPWR: 1024}}
	down := siw
	down.Name, down.State = "iw1", fabric.UplinkDown
	rxe := fabric.Uplink{Name: "rxe0", Kind: fabric.UplinkRXE, RoCEVersion: 2, State: fabric.UplinkUp, MTU: 1024, GIDs: []string{"::ffff:10.1.2.3"}}
	h := fabric.Host{Name: "a", Uplinks: []fabric.Uplink{mlx, ib, siw, down, rxe}}
	want := []pathsel.Port{
		{Name: "hca0", Device: "mlx5_0", Kind: pathsel.RoCE, V2: true, V1: []netip.Addr{netip.MustParseAddr("10.1.2.3")},
			Subnets: []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")}, MTU: 1024, Atomics: true, MaxSGE: 30, MaxInline: 220, Carries: []string{pathsel.FeatureRC}},
		{Name: "ib0", Device: "mlx5_1", Kind: pathsel.IB, LID: 3, SMLID: 1, SubnetPrefix: "fe80:0000:0000:0000", MTU: 4096},
		{Name: "iw0", Device: "siw0", Kind: pathsel.IWARP, MTU: 1024, MaxSGE: 6},
	}
	if got := verbsPorts(h); !reflect.DeepEqual(got, want) {
		t.Fatalf("verbsPorts =\n%+v\nwant\n%+v", got, want)
	}

	// Two hosts whose rxe devices match, on daemons that do not carry QPs
	// on them yet: software RoCEv2, and the reason names the devices.
	v := &VerbsUplink{Device: "rxe0", LinkLayer: "Ethernet", Transport: "InfiniBand", Up: true, MTU: 1024,
		GIDs: [][16]byte{netip.MustParseAddr("::ffff:10.1.2.3").As16()}, GIDTypes: []string{"RoCE v2"},
		Caps: &fabric.VerbsCaps{Atomic: fabric.AtomicHCA, MaxSGE: 32, MaxQPWR: 16384}}
	rec := func(name string) fabric.Host {
		return fabric.Host{Name: name, Uplinks: []fabric.Uplink{verbsRecord("hca0", v), rxe}}
	}
	end := func(name string) pathsel.End {
		h := rec(name)
		return pathsel.End{Adapter: "host " + name, Switch: "sw", Host: name, HostID: name, PortGroup: DefaultPortGroup, RDMA: rdmaUplinks(h), Verbs: verbsPorts(h)}
	}
	c, err := pathsel.Select(end("a"), end("b"))
	if err != nil || c.Kind != pathsel.RDMA || !strings.HasPrefix(c.Reason, "verbs uplinks hca0 (rxe0 on host a) and hca0 (rxe0 on host b) on port group default match (RoCE v2), but the daemons of hosts a and b cannot carry QPs on a device yet; hosts a (rxe0) and b (rxe0) both have an RDMA uplink") {
		t.Fatalf("Select = %v, %v", c, err)
	}
}
