package pathsel

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestSelectBound: the path of a pair of adapters follows their
// instances' bindings to verbs uplinks. Bound adapters' QPs are their
// devices': two bound ones take the devices when the devices reach each
// other and the daemons carry what the QPs ask, and have no path
// otherwise; a bound one and an unbound one meet over the unbound one's
// software RoCEv2 when the device speaks RoCE v2, never over the TCP
// channel; unbound ones keep the software path (memcpy on one host).
func TestSelectBound(t *testing.T) {
	rxe := []string{"rxe0"}
	v2 := func(n string) Port { return carrying(roce(n, "rxe0", true)) }
	// now: a port whose daemon carries what this build carries.
	now := func(n string) Port { p := roce(n, "rxe0", true); p.Carries = Carried(); return p }
	cases := []struct {
		name   string
		a, b   End
		req    Request
		kind   Kind     // "": no path (ErrNoPath)
		has    []string // in the reason, or the error
		errIs  []error  // the error matches these too
		device bool     // Devices set and not blocked
	}{
		{name: "both bound, RoCE v2", a: bind(vend("vm1/vrdma0", "a", nil, v2("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "b", nil, v2("hca1")), "hca1"),
			kind: Verbs, device: true, has: []string{"vm1/vrdma0 is bound to verbs uplink hca0 (rxe0 on host a) and vm2/vrdma0 is bound to verbs uplink hca1 (rxe0 on host b) on port group pg: their QPs are the devices', RoCE v2"}},
		{name: "both bound, atomics carried", a: bind(vend("vm1/vrdma0", "a", nil, v2("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "b", nil, v2("hca1")), "hca1"), req: Request{Atomics: true},
			kind: Verbs, device: true},
		{name: "both bound, SRQs carried", a: bind(vend("vm1/vrdma0", "a", nil, now("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "b", nil, now("hca1")), "hca1"), req: Request{SRQ: true},
			kind: Verbs, device: true},
		{name: "both bound, SRQs carried on one side only", a: bind(vend("vm1/vrdma0", "a", nil, now("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "b", nil, v2("hca1")), "hca1"), req: Request{SRQ: true},
			has: []string{"host b's daemon does not carry SRQs on a device yet"}, errIs: []error{ErrNoDataPath}},
		{name: "both bound, daemons that do not carry SRQs (older builds)", a: bind(vend("vm1/vrdma0", "a", rxe, v2("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "b", rxe, v2("hca1")), "hca1"), req: Request{SRQ: true},
			has: []string{"their QPs have no path but the devices', and the daemons of hosts a and b do not carry SRQs on a device yet"}, errIs: []error{ErrNoDataPath}},
		{name: "both bound, daemons without SRQs, no other path", a: bind(vend("vm1/vrdma0", "a", nil, v2("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "b", nil, v2("hca1")), "hca1"), req: Request{SRQ: true},
			has: []string{"do not carry SRQs on a device yet"}, errIs: []error{ErrNoDataPath}},
		{name: "both bound, inline carried", a: bind(vend("vm1/vrdma0", "a", nil, now("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "b", nil, now("hca1")), "hca1"), req: Request{MaxInline: 64},
			kind: Verbs, device: true},
		{name: "both bound, inline on UD not carried yet", a: bind(vend("vm1/vrdma0", "a", nil, now("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "b", nil, now("hca1")), "hca1"), req: Request{UD: true, MaxInline: 64},
			has: []string{"do not carry inline data on UD QPs on a device yet"}, errIs: []error{ErrNoDataPath}},
		{name: "both bound, one daemon carries nothing", a: bind(vend("vm1/vrdma0", "a", nil, v2("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "b", nil, roce("hca1", "rxe0", true)), "hca1"),
			has: []string{"host b's daemon cannot carry QPs on a device yet"}, errIs: []error{ErrNoDataPath}},
		{name: "both bound, a device lacks atomics", a: bind(vend("vm1/vrdma0", "a", nil, carrying(siw("iw0"))), "iw0"), b: bind(vend("vm2/vrdma0", "b", nil, carrying(siw("iw1"))), "iw1"), req: Request{Atomics: true},
			has: []string{"iw0 (siw0, iWARP) on host a has no atomics"}, errIs: []error{ErrDeviceLacks, syscall.EOPNOTSUPP}},
		{name: "both bound, devices of two kinds", a: bind(vend("vm1/vrdma0", "a", rxe, v2("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "b", rxe, carrying(ib("ib0", 3, 1, subnet))), "ib0"),
			has: []string{"their QPs are the devices', and the devices cannot reach each other: hca0 (rxe0) on host a is RoCE and ib0 (mlx5_0) on host b is InfiniBand"}},
		{name: "bound to an uplink that is down", a: bind(vend("vm1/vrdma0", "a", nil, v2("hca0")), "hca9"), b: bind(vend("vm2/vrdma0", "b", nil, v2("hca1")), "hca1"),
			has: []string{"vm1/vrdma0 is bound to verbs uplink hca9, which is not up on host a"}},
		{name: "bound meets unbound with software RoCEv2", a: bind(vend("vm1/vrdma0", "a", nil, v2("hca0")), "hca0"), b: vend("vm2/vrdma0", "b", []string{"rxe1"}),
			kind: RDMA, has: []string{"vm1/vrdma0 is bound to verbs uplink hca0 (rxe0 on host a): its QPs are the device's, which RoCE v2 reaches; vm2/vrdma0 is not bound: its QPs take host b's software RoCEv2 (rxe1 on port group pg), which is wire-compatible with the device"}},
		{name: "bound meets unbound whose host has a matching device", a: vend("vm1/vrdma0", "a", rxe, v2("hca0")), b: bind(vend("vm2/vrdma0", "b", nil, v2("hca1")), "hca1"),
			kind: RDMA, has: []string{"vm1/vrdma0 is not bound: its QPs take host a's software RoCEv2 (rxe0", "; bound to hca0 (vrdma vm create --uplink hca0), vm1/vrdma0 would take the devices"}},
		{name: "bound meets unbound with only the TCP channel", a: bind(vend("vm1/vrdma0", "a", nil, v2("hca0")), "hca0"), b: vend("vm2/vrdma0", "b", nil),
			has: []string{"its QPs are the device's; vm2/vrdma0 is not bound and host b has no RDMA uplink on port group pg, and the TCP channel cannot reach a device's QPs: only RoCE v2 on the wire does (a native RoCE peer, or vrdma's software RoCEv2 on an rxe link)"}},
		{name: "bound IB meets unbound software", a: bind(vend("vm1/vrdma0", "a", nil, carrying(ib("ib0", 3, 1, subnet))), "ib0"), b: vend("vm2/vrdma0", "b", rxe),
			has: []string{"the device is InfiniBand: only a peer device of its kind reaches its QPs"}},
		{name: "neither bound: the software path", a: vend("vm1/vrdma0", "a", rxe, v2("hca0")), b: vend("vm2/vrdma0", "b", []string{"rxe1"}, v2("hca1")),
			kind: RDMA, has: []string{"but the adapters' instances are not bound to them"}},
		{name: "same host, both bound to one uplink", a: bind(vend("vm1/vrdma0", "a", nil, v2("hca0")), "hca0"), b: bind(vend("vm2/vrdma0", "a", nil, v2("hca0")), "hca0"),
			kind: Verbs, device: true, has: []string{"same host a, vm1/vrdma0 is bound to verbs uplink hca0 (rxe0 on host a) and vm2/vrdma0 is bound to verbs uplink hca0 (rxe0 on host a): their QPs are the device's, the device loops it back"}},
		{name: "same host, one bound", a: bind(vend("vm1/vrdma0", "a", nil, v2("hca0")), "hca0"), b: vend("vm2/vrdma0", "a", nil, v2("hca0")),
			has: []string{"same host a, but vm1/vrdma0 is bound to verbs uplink hca0: its QPs are the device's, and vm2/vrdma0 is not bound"}},
		{name: "same host, neither bound", a: vend("vm1/vrdma0", "a", nil, v2("hca0")), b: vend("vm2/vrdma0", "a", nil, v2("hca0")),
			kind: Memcpy, has: []string{"same host a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, swap := range []bool{false, true} {
				a, b := c.a, c.b
				if swap {
					a, b = b, a
				}
				got, err := SelectFor(a, b, c.req)
				text := got.Reason
				if c.kind == "" {
					if !errors.Is(err, ErrNoPath) {
						t.Fatalf("SelectFor (swapped %v) = %q, %v; want ErrNoPath", swap, got, err)
					}
					for _, e := range c.errIs {
						if !errors.Is(err, e) {
							t.Fatalf("SelectFor (swapped %v): %v does not match %v", swap, err, e)
						}
					}
					text = err.Error()
				} else if err != nil || got.Kind != c.kind {
					t.Fatalf("SelectFor (swapped %v) = %q, %v; want kind %s", swap, got, err, c.kind)
				}
				for _, h := range c.has {
					if !strings.Contains(text, h) {
						t.Fatalf("SelectFor (swapped %v):\n%q\nlacks\n%q", swap, text, h)
					}
				}
				if c.device && (got.Devices == nil || got.Devices.Blocked != nil) {
					t.Fatalf("SelectFor (swapped %v): devices %+v, want the pair taken", swap, got.Devices)
				}
			}
		})
	}
}

// TestDeviceFeatures: the gate's table. This build's data path carries RC
// QPs, atomics, UD QPs, SRQs and inline data on a device and not inline
// data on UD QPs yet (each row that is not carried says why); a host record lists the
// carried ones, RC first.
func TestDeviceFeatures(t *testing.T) {
	want := map[string]bool{FeatureRC: true, "atomics": true, "UD QPs": true, "SRQs": true, "inline data": true, "inline data on UD QPs": false}
	if len(DeviceFeatures) != len(want) {
		t.Fatalf("DeviceFeatures has %d rows, want %d", len(DeviceFeatures), len(want))
	}
	for _, f := range DeviceFeatures {
		c, ok := want[f.Name]
		if !ok || f.Carried != c {
			t.Errorf("row %s carried %v, want %v (known %v)", f.Name, f.Carried, c, ok)
		}
		if !f.Carried && f.Why == "" {
			t.Errorf("row %s is not carried and says not why", f.Name)
		}
	}
	if got := Carried(); len(got) == 0 || got[0] != FeatureRC {
		t.Errorf("Carried() = %v, want RC QPs first", got)
	}
}
