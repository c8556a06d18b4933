package pathsel

import (
	"errors"
	"fmt"
)

// Kind is a path between two adapters.
type Kind string

// The paths, fastest first (DESIGN.md's table).
const (
	Memcpy Kind = "memcpy"
	// Verbs: the hosts' own RDMA devices, through their verbs uplinks.
	Verbs Kind = "verbs"
	// RDMA: vrdma's software RoCEv2 on the hosts' rxe uplinks.
	RDMA Kind = "rdma"
	TCP  Kind = "tcp"
)

// End is what the choice needs to know of one adapter.
type End struct {
	Adapter   string // for messages: "instance/vrdma0"
	Switch    string
	Host      string // the host's name, for messages
	HostID    string // the host's identity: equal identities are the same host
	PortGroup string
	// RDMA lists the host's active RDMA uplinks that carry PortGroup.
	RDMA []string
	// Verbs lists the host's verbs uplinks that are up and carry PortGroup.
	Verbs []Port
}

// Choice is a path and why.
type Choice struct {
	Kind   Kind
	Reason string
	// Devices is the pair of verbs uplinks the hosts' devices could use,
	// nil if none matches; when Kind is not Verbs, Devices.Blocked says
	// why the pair does not take them.
	Devices *DevicePair
}

func (c Choice) String() string { return string(c.Kind) + ": " + c.Reason }

// ErrNoPath is matched by the errors of Select: the two adapters cannot be
// connected at all.
var ErrNoPath = errors.New("no path between the adapters")

// Select chooses the path between a and b for a request that asks
// nothing special: SelectFor(a, b, Request{}).
func Select(a, b End) (Choice, error) { return SelectFor(a, b, Request{}) }

// SelectFor chooses the path between a and b for QPs that ask r. It is
// symmetric: SelectFor(a, b, r) and SelectFor(b, a, r) give the same kind,
// and reasons that name the same facts.
//
// Two hosts take their own devices (Verbs) when a verbs uplink of each
// matches the other's (matchDevices), both devices can do what r asks
// (CheckDevice) and both daemons can carry QPs on them; otherwise they take
// the software path (RDMA or TCP) as if they had no verbs uplinks, and the
// reason says what kept them off the devices, so the choice is never a
// silent downgrade.
func SelectFor(a, b End, r Request) (Choice, error) {
	// Order the two ends so that every message is the same from both sides.
	if a.Adapter > b.Adapter {
		a, b = b, a
	}
	switch {
	case a.Switch == "" || b.Switch == "":
		return Choice{}, fmt.Errorf("%w: %s is on no switch: create it on a daemon that joined one (vrdma switch show)", ErrNoPath, pick(a.Switch == "", a.Adapter, b.Adapter))
	case a.Switch != b.Switch:
		return Choice{}, fmt.Errorf("%w: %s is on switch %q and %s on %q: adapters of different switches cannot connect; join both daemons to one etcd cluster", ErrNoPath, a.Adapter, a.Switch, b.Adapter, b.Switch)
	case a.HostID == "" || b.HostID == "":
		return Choice{}, fmt.Errorf("%w: the host of %s has no identity yet: is its daemon registered? (vrdma host show)", ErrNoPath, pick(a.HostID == "", a.Adapter, b.Adapter))
	}
	if a.HostID == b.HostID {
		return Choice{Kind: Memcpy, Reason: fmt.Sprintf("same host %s", a.Host)}, nil
	}
	if a.PortGroup != b.PortGroup {
		return Choice{}, fmt.Errorf("%w: %s is on port group %q and %s on %q: put both adapters on one port group (vrdma vm create --portgroup)", ErrNoPath, a.Adapter, a.PortGroup, b.Adapter, b.PortGroup)
	}
	soft := software(a, b)
	pair, why := matchDevices(a, b)
	if pair == nil {
		if why != "" {
			soft.Reason += "; not the devices: " + why
		}
		return soft, nil
	}
	on := fmt.Sprintf("verbs uplinks %s (%s on host %s) and %s (%s on host %s) on port group %s", pair.A.Name, pair.A.Device, a.Host, pair.B.Name, pair.B.Device, b.Host, a.PortGroup)
	// What a device lacks comes first: it holds whatever the daemons can
	// do, so it is what the reason should say.
	if err := CheckDevice(a.Host, pair.A, r); err != nil {
		pair.Blocked = err
	} else if err := CheckDevice(b.Host, pair.B, r); err != nil {
		pair.Blocked = err
	} else if !pair.A.CarriesQPs || !pair.B.CarriesQPs {
		pair.Blocked = fmt.Errorf("%s %w", cannotCarry(a.Host, pair.A.CarriesQPs, b.Host, pair.B.CarriesQPs), ErrNoDataPath)
	}
	if pair.Blocked == nil {
		return Choice{Kind: Verbs, Reason: on + ": " + pair.Mode, Devices: pair}, nil
	}
	soft.Reason = fmt.Sprintf("%s match (%s), but %v; %s", on, pair.Mode, pair.Blocked, soft.Reason)
	soft.Devices = pair
	return soft, nil
}

// cannotCarry names the hosts whose daemons cannot carry QPs on a device.
func cannotCarry(ha string, ca bool, hb string, cb bool) string {
	switch {
	case !ca && !cb:
		return fmt.Sprintf("the daemons of hosts %s and %s", ha, hb)
	case !ca:
		return "host " + ha + "'s daemon"
	}
	return "host " + hb + "'s daemon"
}

// software is the path between two hosts of one port group without their
// devices: vrdma's own RoCEv2 on rxe uplinks, or the TCP channel.
func software(a, b End) Choice {
	switch na, nb := len(a.RDMA) == 0, len(b.RDMA) == 0; {
	case !na && !nb:
		return Choice{Kind: RDMA, Reason: fmt.Sprintf("hosts %s (%s) and %s (%s) both have an RDMA uplink on port group %s", a.Host, a.RDMA[0], b.Host, b.RDMA[0], a.PortGroup)}
	case na && nb:
		if a.Host > b.Host {
			a, b = b, a
		}
		return Choice{Kind: TCP, Reason: fmt.Sprintf("neither host %s nor host %s has an RDMA uplink on port group %s", a.Host, b.Host, a.PortGroup)}
	case na:
		return Choice{Kind: TCP, Reason: fmt.Sprintf("host %s has no RDMA uplink on port group %s", a.Host, a.PortGroup)}
	default:
		return Choice{Kind: TCP, Reason: fmt.Sprintf("host %s has no RDMA uplink on port group %s", b.Host, b.PortGroup)}
	}
}

func pick(first bool, a, b string) string {
	if first {
		return a
	}
	return b
}
