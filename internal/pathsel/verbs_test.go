package pathsel

import (
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
)

// Fake device records: what the switch's host records say of a port of
// an mlx5 (RoCE v1 and v2 GIDs), rdma_rxe (v2 only), an InfiniBand HCA and
// siw (iWARP). carrying sets CarriesQPs.
func roce(name, dev string, v2 bool, v1 ...string) Port {
	p := Port{Name: name, Device: dev, Kind: RoCE, V2: v2, MTU: 1024, Atomics: true, MaxSGE: 32}
	for _, g := range v1 {
		p.V1 = append(p.V1, netip.MustParseAddr(g))
		p.Subnets = append(p.Subnets, netip.MustParsePrefix(g+"/24").Masked())
	}
	return p
}

func ib(name string, lid, sm uint16, subnet string) Port {
	return Port{Name: name, Device: "mlx5_0", Kind: IB, LID: lid, SMLID: sm, SubnetPrefix: subnet, MTU: 4096, Atomics: true, MaxSGE: 30, MaxInline: 512}
}

func siw(name string) Port {
	return Port{Name: name, Device: "siw0", Kind: IWARP, MTU: 1024, MaxSGE: 6}
}

// carrying: the port's daemon carries RC QPs and atomics on the device
// (what the data path carries today), not SRQs or inline data.
func carrying(p Port) Port { p.Carries = []string{FeatureRC, "atomics"}; return p }

// carryingAll: the port's daemon carries every row of DeviceFeatures.
func carryingAll(p Port) Port {
	p.Carries = nil
	for _, f := range DeviceFeatures {
		p.Carries = append(p.Carries, f.Name)
	}
	return p
}

// bind binds e's instance to the verbs uplink called uplink.
func bind(e End, uplink string) End { e.Bound = uplink; return e }

func vend(adapter, host string, rdma []string, ports ...Port) End {
	e := end(adapter, host, "pg", rdma...)
	e.Verbs = ports
	return e
}

const subnet = "fe80:0000:0000:0000"

// TestSelectVerbs: the verbs rows of the path table. A pair of hosts whose
// verbs uplinks match (RoCE v2 on both, RoCE v1 on one segment, one IB
// subnet with LIDs, iWARP on both) takes the devices only when both daemons
// can carry QPs on them and both devices can do what the request asks;
// otherwise it takes the software path and the reason says why not the
// devices.
func TestSelectVerbs(t *testing.T) {
	rxe := []string{"rxe0"}
	cases := []struct {
		name    string
		a, b    End
		req     Request
		kind    Kind
		reason  string // the whole reason, or
		has     []string
		blocked error // Devices.Blocked matches it; nil: Devices nil or not blocked
	}{
		{name: "same host keeps memcpy", a: vend("i1/vrdma0", "a", nil, carrying(roce("hca0", "rxe0", true))), b: vend("i2/vrdma0", "a", nil, carrying(roce("hca0", "rxe0", true))),
			kind: Memcpy, reason: "same host a"},
		{name: "RoCE v2 both, daemons carry QPs, both bound", a: bind(vend("i1/vrdma0", "a", rxe, carrying(roce("hca0", "rxe0", true))), "hca0"), b: bind(vend("i2/vrdma0", "b", nil, carrying(roce("hca1", "mlx5_0", true))), "hca1"),
			kind: Verbs, reason: "i1/vrdma0 is bound to verbs uplink hca0 (rxe0 on host a) and i2/vrdma0 is bound to verbs uplink hca1 (mlx5_0 on host b) on port group pg: their QPs are the devices', RoCE v2"},
		{name: "RoCE v2 both, daemons carry QPs, neither bound: software", a: vend("i1/vrdma0", "a", rxe, carrying(roce("hca0", "rxe0", true))), b: vend("i2/vrdma0", "b", []string{"rxe1"}, carrying(roce("hca1", "mlx5_0", true))),
			kind: RDMA, reason: "verbs uplinks hca0 (rxe0 on host a) and hca1 (mlx5_0 on host b) on port group pg match (RoCE v2), but the adapters' instances are not bound to them (an instance made with `vrdma vm create --uplink hca0` has its QPs on the device); hosts a (rxe0) and b (rxe1) both have an RDMA uplink on port group pg",
			blocked: ErrNotBound},
		{name: "RoCE v2 both, daemons cannot carry QPs yet: software RoCEv2", a: vend("i1/vrdma0", "a", rxe, roce("hca0", "rxe0", true)), b: vend("i2/vrdma0", "b", []string{"rxe1"}, roce("hca1", "mlx5_0", true)),
			kind: RDMA, reason: "verbs uplinks hca0 (rxe0 on host a) and hca1 (mlx5_0 on host b) on port group pg match (RoCE v2), but the daemons of hosts a and b cannot carry QPs on a device yet; hosts a (rxe0) and b (rxe1) both have an RDMA uplink on port group pg",
			blocked: ErrNoDataPath},
		{name: "one daemon cannot carry QPs: TCP", a: vend("i1/vrdma0", "a", nil, carrying(roce("hca0", "rxe0", true))), b: vend("i2/vrdma0", "b", nil, roce("hca1", "rxe0", true)),
			kind: TCP, has: []string{"but host b's daemon cannot carry QPs on a device yet; neither host a nor host b has an RDMA uplink on port group pg"}, blocked: ErrNoDataPath},
		{name: "RoCE v1 on one segment", a: bind(vend("i1/vrdma0", "a", nil, carrying(roce("hca0", "mlx5_0", false, "10.1.2.3"))), "hca0"), b: bind(vend("i2/vrdma0", "b", nil, carrying(roce("hca1", "mlx5_0", false, "10.1.2.4"))), "hca1"),
			kind: Verbs, has: []string{"on port group pg: their QPs are the devices', RoCE v1"}},
		{name: "RoCE v1 across subnets", a: vend("i1/vrdma0", "a", nil, carrying(roce("hca0", "mlx5_0", false, "10.1.2.3"))), b: vend("i2/vrdma0", "b", nil, carrying(roce("hca1", "mlx5_0", false, "10.1.9.4"))),
			kind: TCP, has: []string{"not the devices: hca0 (mlx5_0) on host a and hca1 (mlx5_0) on host b have RoCE v1 GIDs on different IP subnets", "RoCE v1 does not cross routers"}},
		{name: "RoCE v2 on one, v1 only on the other", a: vend("i1/vrdma0", "a", nil, carrying(roce("hca0", "rxe0", true))), b: vend("i2/vrdma0", "b", nil, carrying(roce("hca1", "mlx5_0", false, "10.1.2.4"))),
			kind: TCP, has: []string{"share no GID type (RoCE v2 on both, or RoCE v1 on one L2 segment)"}},
		{name: "mlx5 with both types meets rxe: v2", a: bind(vend("i1/vrdma0", "a", nil, carrying(roce("hca0", "mlx5_0", true, "10.1.2.3"))), "hca0"), b: bind(vend("i2/vrdma0", "b", nil, carrying(roce("hca1", "rxe0", true))), "hca1"),
			kind: Verbs, has: []string{"devices', RoCE v2"}},
		{name: "software link only on one side", a: vend("i1/vrdma0", "a", rxe, carrying(roce("hca0", "rxe0", true))), b: vend("i2/vrdma0", "b", []string{"rxe1"}),
			kind: RDMA, reason: "hosts a (rxe0) and b (rxe1) both have an RDMA uplink on port group pg; not the devices: host b has no verbs uplink"},
		{name: "nothing on one side", a: vend("i1/vrdma0", "a", nil), b: vend("i2/vrdma0", "b", nil, carrying(roce("hca1", "rxe0", true))),
			kind: TCP, reason: "neither host a nor host b has an RDMA uplink on port group pg; not the devices: host a has no verbs uplink"},
		{name: "IB on one subnet", a: bind(vend("i1/vrdma0", "a", nil, carrying(ib("ib0", 3, 1, subnet))), "ib0"), b: bind(vend("i2/vrdma0", "b", nil, carrying(ib("ib1", 7, 1, subnet))), "ib1"),
			kind: Verbs, has: []string{"their QPs are the devices', InfiniBand (LID 3 and 7, subnet fe80:0000:0000:0000)"}},
		{name: "IB without a LID", a: vend("i1/vrdma0", "a", nil, carrying(ib("ib0", 3, 1, subnet))), b: vend("i2/vrdma0", "b", nil, carrying(ib("ib1", 0, 0, subnet))),
			kind: TCP, has: []string{"ib1 (mlx5_0) on host b has no LID: InfiniBand routes by LID", "opensm"}},
		{name: "IB on two subnets", a: vend("i1/vrdma0", "a", nil, carrying(ib("ib0", 3, 1, subnet))), b: vend("i2/vrdma0", "b", nil, carrying(ib("ib1", 7, 1, "fe80:0000:0000:0001"))),
			kind: TCP, has: []string{"are on different InfiniBand subnets"}},
		{name: "IB with one LID twice", a: vend("i1/vrdma0", "a", nil, carrying(ib("ib0", 3, 1, subnet))), b: vend("i2/vrdma0", "b", nil, carrying(ib("ib1", 3, 1, subnet))),
			kind: TCP, has: []string{"both have LID 3"}},
		{name: "RoCE meets IB", a: vend("i1/vrdma0", "a", nil, carrying(roce("hca0", "rxe0", true))), b: vend("i2/vrdma0", "b", nil, carrying(ib("ib1", 3, 1, subnet))),
			kind: TCP, has: []string{"hca0 (rxe0) on host a is RoCE and ib1 (mlx5_0) on host b is InfiniBand: a device reaches only devices of its own kind"}},
		{name: "second uplink matches", a: vend("i1/vrdma0", "a", nil, carrying(ib("ib0", 3, 1, subnet)), carrying(roce("hca0", "rxe0", true))), b: vend("i2/vrdma0", "b", nil, carrying(roce("hca1", "rxe0", true))),
			kind: TCP, has: []string{"verbs uplinks hca0 (rxe0 on host a) and hca1"}, blocked: ErrNotBound},
		{name: "iWARP RC", a: bind(vend("i1/vrdma0", "a", nil, carrying(siw("iw0"))), "iw0"), b: bind(vend("i2/vrdma0", "b", nil, carrying(siw("iw1"))), "iw1"),
			kind: Verbs, reason: "i1/vrdma0 is bound to verbs uplink iw0 (siw0 on host a) and i2/vrdma0 is bound to verbs uplink iw1 (siw0 on host b) on port group pg: their QPs are the devices', iWARP"},
		{name: "iWARP asked for UD", a: vend("i1/vrdma0", "a", rxe, carrying(siw("iw0"))), b: vend("i2/vrdma0", "b", []string{"rxe1"}, carrying(siw("iw1"))), req: Request{UD: true},
			kind: RDMA, has: []string{"but iw0 (siw0, iWARP) on host a has no UD QPs: ibv_create_qp would fail with EOPNOTSUPP", "; hosts a (rxe0) and b (rxe1) both have an RDMA uplink"}, blocked: syscall.EOPNOTSUPP},
		{name: "iWARP asked for atomics", a: vend("i1/vrdma0", "a", nil, carrying(siw("iw0"))), b: vend("i2/vrdma0", "b", nil, carrying(siw("iw1"))), req: Request{Atomics: true},
			kind: TCP, has: []string{"iw0 (siw0, iWARP) on host a has no atomics: ibv_modify_qp would fail with EOPNOTSUPP"}, blocked: ErrDeviceLacks},
		{name: "path MTU over the device's", a: vend("i1/vrdma0", "a", nil, carrying(roce("hca0", "rxe0", true))), b: vend("i2/vrdma0", "b", nil, carrying(roce("hca1", "rxe0", true))), req: Request{MTU: 4096},
			kind: TCP, has: []string{"hca0 (rxe0, RoCE) on host a takes path MTU 1024, the instance asks for 4096: ibv_modify_qp would fail with EINVAL"}, blocked: syscall.EINVAL},
		{name: "too many SGEs", a: vend("i1/vrdma0", "a", nil, carrying(ib("ib0", 3, 1, subnet))), b: vend("i2/vrdma0", "b", nil, carrying(ib("ib1", 7, 1, subnet))), req: Request{MaxSGE: 31},
			kind: TCP, has: []string{"takes max_sge 30, the instance asks for 31: ibv_create_qp would fail with EINVAL"}, blocked: ErrDeviceLacks},
		{name: "too much inline data", a: vend("i1/vrdma0", "a", nil, carrying(ib("ib0", 3, 1, subnet))), b: vend("i2/vrdma0", "b", nil, carrying(ib("ib1", 7, 1, subnet))), req: Request{MaxInline: 1024},
			kind: TCP, has: []string{"takes max_inline_data 512, the instance asks for 1024"}, blocked: ErrDeviceLacks},
		{name: "a lack shows before the daemons' gate", a: vend("i1/vrdma0", "a", nil, siw("iw0")), b: vend("i2/vrdma0", "b", nil, siw("iw1")), req: Request{UD: true},
			kind: TCP, has: []string{"match (iWARP), but iw0 (siw0, iWARP) on host a has no UD QPs: ibv_create_qp would fail with EOPNOTSUPP"}, blocked: syscall.EOPNOTSUPP},
		{name: "within every limit, every feature carried", a: bind(vend("i1/vrdma0", "a", nil, carryingAll(ib("ib0", 3, 1, subnet))), "ib0"), b: bind(vend("i2/vrdma0", "b", nil, carryingAll(ib("ib1", 7, 1, subnet))), "ib1"),
			req: Request{UD: true, SRQ: true, Atomics: true, MaxInline: 512, MaxSGE: 30, MTU: 4096}, kind: Verbs, has: []string{"InfiniBand"}},
		{name: "SRQs not carried yet, unbound: software says so", a: vend("i1/vrdma0", "a", rxe, carrying(ib("ib0", 3, 1, subnet))), b: vend("i2/vrdma0", "b", []string{"rxe1"}, carrying(ib("ib1", 7, 1, subnet))), req: Request{SRQ: true},
			kind: RDMA, has: []string{"match (InfiniBand (LID 3 and 7, subnet fe80:0000:0000:0000)), but the daemons of hosts a and b do not carry SRQs on a device yet; hosts a (rxe0)"}, blocked: ErrNoDataPath},
		{name: "SRQs carried on one side only", a: vend("i1/vrdma0", "a", nil, carryingAll(ib("ib0", 3, 1, subnet))), b: vend("i2/vrdma0", "b", nil, carrying(ib("ib1", 7, 1, subnet))), req: Request{SRQ: true},
			kind: TCP, has: []string{"but host b's daemon does not carry SRQs on a device yet"}, blocked: ErrNoDataPath},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, swap := range []bool{false, true} {
				a, b := c.a, c.b
				if swap {
					a, b = b, a
				}
				got, err := SelectFor(a, b, c.req)
				if err != nil || got.Kind != c.kind {
					t.Fatalf("SelectFor (swapped %v) = %q, %v; want kind %s", swap, got, err, c.kind)
				}
				if c.reason != "" && got.Reason != c.reason {
					t.Fatalf("SelectFor (swapped %v) reason\n%q\nwant\n%q", swap, got.Reason, c.reason)
				}
				for _, h := range c.has {
					if !strings.Contains(got.Reason, h) {
						t.Fatalf("SelectFor (swapped %v) reason\n%q\nlacks %q", swap, got.Reason, h)
					}
				}
				switch {
				case c.blocked != nil:
					if got.Devices == nil || !errors.Is(got.Devices.Blocked, c.blocked) {
						t.Fatalf("SelectFor (swapped %v) devices %+v; want blocked by %v", swap, got.Devices, c.blocked)
					}
				case got.Kind == Verbs:
					if got.Devices == nil || got.Devices.Blocked != nil {
						t.Fatalf("SelectFor (swapped %v) took the devices with %+v", swap, got.Devices)
					}
				}
			}
		})
	}
}

// TestCheckDeviceErrors: a device's lack is a typed error carrying the
// errno rdma-core gives (EOPNOTSUPP for what the device has not, EINVAL
// for a limit over the device's), and what the record does not say (an
// inline limit not probed) is not refused.
func TestCheckDeviceErrors(t *testing.T) {
	cases := []struct {
		name  string
		p     Port
		r     Request
		errno syscall.Errno // 0: no error
		what  string
	}{
		{"siw UD", siw("iw0"), Request{UD: true}, syscall.EOPNOTSUPP, "UD QPs"},
		{"siw atomics", siw("iw0"), Request{Atomics: true}, syscall.EOPNOTSUPP, "atomics"},
		{"siw RC within limits", siw("iw0"), Request{MaxSGE: 6, MTU: 1024}, 0, ""},
		{"rxe SGEs", roce("hca0", "rxe0", true), Request{MaxSGE: 33}, syscall.EINVAL, "max_sge"},
		{"rxe MTU", roce("hca0", "rxe0", true), Request{MTU: 2048}, syscall.EINVAL, "path MTU"},
		{"inline not probed", roce("hca0", "rxe0", true), Request{MaxInline: 1 << 20}, 0, ""},
		{"IB UD and atomics", ib("ib0", 1, 1, subnet), Request{UD: true, Atomics: true}, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckDevice("a", c.p, c.r)
			if c.errno == 0 {
				if err != nil {
					t.Fatalf("CheckDevice = %v, want nil", err)
				}
				return
			}
			var le *LackError
			if !errors.As(err, &le) || !errors.Is(err, ErrDeviceLacks) || !errors.Is(err, c.errno) || le.What != c.what {
				t.Fatalf("CheckDevice = %v; want a *LackError about %s with %v", err, c.what, c.errno)
			}
		})
	}
}
