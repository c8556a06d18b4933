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
	RDMA   Kind = "rdma"
	TCP    Kind = "tcp"
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
}

// Choice is a path and why.
type Choice struct {
	Kind   Kind
	Reason string
}

func (c Choice) String() string { return string(c.Kind) + ": " + c.Reason }

// ErrNoPath is matched by the errors of Select: the two adapters cannot be
// connected at all.
var ErrNoPath = errors.New("no path between the adapters")

// Select chooses the path between a and b. It is symmetric: Select(a, b)
// and Select(b, a) give the same kind, and reasons that name the same facts.
func Select(a, b End) (Choice, error) {
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
		return Choice{Memcpy, fmt.Sprintf("same host %s", a.Host)}, nil
	}
	if a.PortGroup != b.PortGroup {
		return Choice{}, fmt.Errorf("%w: %s is on port group %q and %s on %q: put both adapters on one port group (vrdma vm create --portgroup)", ErrNoPath, a.Adapter, a.PortGroup, b.Adapter, b.PortGroup)
	}
	switch na, nb := len(a.RDMA) == 0, len(b.RDMA) == 0; {
	case !na && !nb:
		return Choice{RDMA, fmt.Sprintf("hosts %s (%s) and %s (%s) both have an RDMA uplink on port group %s", a.Host, a.RDMA[0], b.Host, b.RDMA[0], a.PortGroup)}, nil
	case na && nb:
		if a.Host > b.Host {
			a, b = b, a
		}
		return Choice{TCP, fmt.Sprintf("neither host %s nor host %s has an RDMA uplink on port group %s", a.Host, b.Host, a.PortGroup)}, nil
	case na:
		return Choice{TCP, fmt.Sprintf("host %s has no RDMA uplink on port group %s", a.Host, a.PortGroup)}, nil
	default:
		return Choice{TCP, fmt.Sprintf("host %s has no RDMA uplink on port group %s", b.Host, b.PortGroup)}, nil
	}
}

func pick(first bool, a, b string) string {
	if first {
		return a
	}
	return b
}
