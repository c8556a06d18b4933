package pathsel

import (
	"errors"
	"fmt"
	"net/netip"
)

// Device kinds: what a verbs uplink's device speaks on the wire, from its
// transport and link layer.
const (
	RoCE  = "RoCE"       // transport InfiniBand, link layer Ethernet
	IB    = "InfiniBand" // transport InfiniBand, link layer InfiniBand
	IWARP = "iWARP"      // transport iWARP (TCP underneath)
)

// Port is a verbs uplink of a host that is up: a port of the host's own
// RDMA device, as its host record describes it.
type Port struct {
	Name   string // the uplink, "hca0"
	Device string // the rdma-core device, "mlx5_0"
	Kind   string // RoCE, IB or IWARP

	// RoCE: whether the port has a RoCE v2 GID; its RoCE v1 GIDs
	// (link-local ones left out: they name no segment) and the IP subnets
	// of its netdev, which say which L2 segment a v1 GID is on.
	V2      bool
	V1      []netip.Addr
	Subnets []netip.Prefix

	// InfiniBand: the port's LID and its subnet manager's (0: none
	// assigned), and the subnet prefix (the upper 64 bits of GID 0).
	LID, SMLID   uint16
	SubnetPrefix string

	MTU       int  // the port's active MTU in bytes
	Atomics   bool // atomic_cap is not IBV_ATOMIC_NONE
	MaxSGE    int  // 0: not known
	MaxInline int  // 0: not known (rdma-core reports it only per QP)

	// Carries names what the host's daemon carries of an instance's QPs on
	// this device (DeviceFeatures' names; FeatureRC first): none, and the
	// port is a candidate only.
	Carries []string
}

// DevicePair is the devices a pair of hosts could use, and how: Mode is
// "RoCE v2", "RoCE v1", "InfiniBand" or "iWARP". Blocked is why the pair
// does not take them (ErrNoDataPath, or a *LackError), nil when it does.
type DevicePair struct {
	A, B    Port
	Mode    string
	Blocked error
}

// ErrNoDataPath: a daemon cannot carry QPs (or what they ask) on its
// verbs uplink yet.
var ErrNoDataPath = errors.New("cannot carry QPs on a device yet")

// ErrNotBound: the devices match, but neither adapter's instance is bound
// to a verbs uplink, so their QPs are the engine's, not the devices'.
var ErrNotBound = errors.New("instances not bound to a verbs uplink")

// matchDevices finds the first pair of a's and b's ports (in their order)
// whose devices can reach each other, or says why none can ("" when a
// host has no verbs uplink at all).
func matchDevices(a, b End) (*DevicePair, string) {
	switch {
	case len(a.Verbs) == 0 && len(b.Verbs) == 0:
		return nil, ""
	case len(a.Verbs) == 0:
		return nil, fmt.Sprintf("host %s has no verbs uplink", a.Host)
	case len(b.Verbs) == 0:
		return nil, fmt.Sprintf("host %s has no verbs uplink", b.Host)
	}
	first := ""
	for _, pa := range a.Verbs {
		for _, pb := range b.Verbs {
			mode, why := match(a.Host, pa, b.Host, pb)
			if why == "" {
				return &DevicePair{A: pa, B: pb, Mode: mode}, ""
			}
			if first == "" {
				first = why
			}
		}
	}
	return nil, first
}

// match says how ports pa (of host ha) and pb (of hb) reach each other, or
// why they cannot.
func match(ha string, pa Port, hb string, pb Port) (mode, why string) {
	name := func(h string, p Port) string { return fmt.Sprintf("%s (%s) on host %s", p.Name, p.Device, h) }
	if pa.Kind != pb.Kind {
		return "", fmt.Sprintf("%s is %s and %s is %s: a device reaches only devices of its own kind", name(ha, pa), pa.Kind, name(hb, pb), pb.Kind)
	}
	switch pa.Kind {
	case RoCE:
		if pa.V2 && pb.V2 {
			return "RoCE v2", ""
		}
		if len(pa.V1) > 0 && len(pb.V1) > 0 {
			if sameSegment(pa, pb) {
				return "RoCE v1", ""
			}
			return "", fmt.Sprintf("%s and %s have RoCE v1 GIDs on different IP subnets and no RoCE v2 GID on both: RoCE v1 does not cross routers; give both a RoCE v2 GID", name(ha, pa), name(hb, pb))
		}
		return "", fmt.Sprintf("%s and %s share no GID type (RoCE v2 on both, or RoCE v1 on one L2 segment)", name(ha, pa), name(hb, pb))
	case IB:
		switch {
		case pa.LID == 0 || pb.LID == 0:
			h, p := ha, pa
			if pa.LID != 0 {
				h, p = hb, pb
			}
			return "", fmt.Sprintf("%s has no LID: InfiniBand routes by LID and no subnet manager has configured the port (run opensm on the subnet)", name(h, p))
		case pa.SubnetPrefix != pb.SubnetPrefix || pa.SMLID != pb.SMLID:
			return "", fmt.Sprintf("%s (subnet %s, SM LID %d) and %s (subnet %s, SM LID %d) are on different InfiniBand subnets: vrdma does not route between subnets", name(ha, pa), pa.SubnetPrefix, pa.SMLID, name(hb, pb), pb.SubnetPrefix, pb.SMLID)
		case pa.LID == pb.LID:
			return "", fmt.Sprintf("%s and %s both have LID %d: one subnet gives each port its own LID; check the subnet manager", name(ha, pa), name(hb, pb), pa.LID)
		}
		return fmt.Sprintf("InfiniBand (LID %d and %d, subnet %s)", pa.LID, pb.LID, pa.SubnetPrefix), ""
	case IWARP:
		return "iWARP", ""
	}
	return "", fmt.Sprintf("%s is of unknown kind %q", name(ha, pa), pa.Kind)
}

// sameSegment: an IP subnet both ports' netdevs have holds a RoCE v1 GID
// of each, which is what the hosts' own routing takes for one L2 segment.
func sameSegment(pa, pb Port) bool {
	for _, s := range pa.Subnets {
		if !hasPrefix(pb.Subnets, s) {
			continue
		}
		if anyIn(s, pa.V1) && anyIn(s, pb.V1) {
			return true
		}
	}
	return false
}

func hasPrefix(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func anyIn(p netip.Prefix, gids []netip.Addr) bool {
	for _, g := range gids {
		if p.Contains(g.Unmap()) {
			return true
		}
	}
	return false
}
