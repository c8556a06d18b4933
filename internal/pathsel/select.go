package pathsel

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// Bound is the verbs uplink the adapter's instance is bound to
	// (`vrdma vm create --uplink`), "" if none: a bound adapter's QPs are
	// that uplink's device's, an unbound one's the engine's.
	Bound string
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
// An adapter whose instance is bound to a verbs uplink (End.Bound) has
// its QPs on that uplink's device; one that is not has them in the
// engine, on the software paths. So two bound adapters take their devices
// (Verbs) when the devices reach each other (matchDevices' rules), can do
// what r asks (CheckDevice) and both daemons carry it (DeviceFeatures);
// else there is no path, since a bound adapter's QPs have no other. A
// bound adapter and an unbound one on another host meet on the wire only
// if the device speaks RoCE v2 and the unbound one's host has an rxe
// uplink (vrdma's software RoCEv2 is wire-compatible); the TCP channel
// cannot reach a device's QPs. Two unbound adapters take the software
// path (memcpy on one host, RDMA or TCP between hosts), and the reason
// names the hosts' matching devices and what keeps the pair off them, so
// the choice is never a silent downgrade.
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
		return sameHost(a, b, r)
	}
	if a.PortGroup != b.PortGroup {
		return Choice{}, fmt.Errorf("%w: %s is on port group %q and %s on %q: put both adapters on one port group (vrdma vm create --portgroup)", ErrNoPath, a.Adapter, a.PortGroup, b.Adapter, b.PortGroup)
	}
	switch {
	case a.Bound != "" && b.Bound != "":
		return bothBound(a, b, r)
	case a.Bound != "":
		return oneBound(a, b)
	case b.Bound != "":
		return oneBound(b, a)
	}
	return unbound(a, b, r), nil
}

// unbound is the path of two unbound adapters of different hosts: the
// software path, with why not the hosts' devices.
func unbound(a, b End, r Request) Choice {
	soft := software(a, b)
	pair, why := matchDevices(a, b)
	if pair == nil {
		if why != "" {
			soft.Reason += "; not the devices: " + why
		}
		return soft
	}
	on := fmt.Sprintf("verbs uplinks %s (%s on host %s) and %s (%s on host %s) on port group %s", pair.A.Name, pair.A.Device, a.Host, pair.B.Name, pair.B.Device, b.Host, a.PortGroup)
	// What a device lacks comes first: it holds whatever the daemons can
	// do, so it is what the reason should say; then what the daemons do
	// not carry; then the binding, which the operator can change.
	pair.Blocked = devicesBlocked(a.Host, pair.A, b.Host, pair.B, r)
	if pair.Blocked == nil {
		pair.Blocked = &reasonError{fmt.Sprintf("the adapters' instances are not bound to them (an instance made with `vrdma vm create --uplink %s` has its QPs on the device)", pair.A.Name), ErrNotBound}
	}
	soft.Reason = fmt.Sprintf("%s match (%s), but %v; %s", on, pair.Mode, pair.Blocked, soft.Reason)
	soft.Devices = pair
	return soft
}

// devicesBlocked is why QPs that ask r cannot be carried on the pair of
// devices pa (of host ha) and pb (of hb): what a device lacks (a
// *LackError), or what a daemon does not carry (ErrNoDataPath); nil if
// they can.
func devicesBlocked(ha string, pa Port, hb string, pb Port, r Request) error {
	if err := CheckDevice(ha, pa, r); err != nil {
		return err
	}
	if err := CheckDevice(hb, pb, r); err != nil {
		return err
	}
	f, ok := uncarried(pa, r)
	if !ok {
		if f, ok = uncarried(pb, r); !ok {
			return nil
		}
	}
	who := cannotCarry(ha, slices.Contains(pa.Carries, f.Name), hb, slices.Contains(pb.Carries, f.Name))
	if f.Name == FeatureRC {
		return &reasonError{who + " cannot carry QPs on a device yet", ErrNoDataPath}
	}
	msg := fmt.Sprintf("%s do not carry %s on a device yet", who, f.Name)
	if !strings.HasPrefix(who, "the daemons") {
		msg = fmt.Sprintf("%s does not carry %s on a device yet", who, f.Name)
	}
	return &reasonError{msg, ErrNoDataPath}
}

// reasonError is a reason in words that errors.Is matches to its sentinel
// (ErrNoDataPath, ErrNotBound).
type reasonError struct {
	msg string
	is  error
}

func (e *reasonError) Error() string        { return e.msg }
func (e *reasonError) Is(target error) bool { return target == e.is }

// cannotCarry names the hosts whose daemons cannot carry QPs on a device.
func cannotCarry(ha string, ca bool, hb string, cb bool) string {
	switch {
	case !ca && !cb:
		if ha == hb {
			return "host " + ha + "'s daemon"
		}
		return fmt.Sprintf("the daemons of hosts %s and %s", ha, hb)
	case !ca:
		return "host " + ha + "'s daemon"
	}
	return "host " + hb + "'s daemon"
}

// boundPort is the verbs uplink e's instance is bound to, if it is up on
// e's host for e's port group.
func boundPort(e End) (Port, error) {
	for _, p := range e.Verbs {
		if p.Name == e.Bound {
			return p, nil
		}
	}
	return Port{}, fmt.Errorf("%w: %s is bound to verbs uplink %s, which is not up on host %s: its QPs cannot be made on the device (`vrdma link show %s` on host %s says why)", ErrNoPath, e.Adapter, e.Bound, e.Host, e.Bound, e.Host)
}

// bound names a bound adapter and its device.
func bound(e End, p Port) string {
	return fmt.Sprintf("%s is bound to verbs uplink %s (%s on host %s)", e.Adapter, p.Name, p.Device, e.Host)
}

// bothBound is the path of two bound adapters of different hosts: their
// devices, or none.
func bothBound(a, b End, r Request) (Choice, error) {
	pa, err := boundPort(a)
	if err != nil {
		return Choice{}, err
	}
	pb, err := boundPort(b)
	if err != nil {
		return Choice{}, err
	}
	both := fmt.Sprintf("%s and %s", bound(a, pa), bound(b, pb))
	mode, why := match(a.Host, pa, b.Host, pb)
	if why != "" {
		return Choice{}, fmt.Errorf("%w: %s: their QPs are the devices', and the devices cannot reach each other: %s", ErrNoPath, both, why)
	}
	pair := &DevicePair{A: pa, B: pb, Mode: mode}
	if err := devicesBlocked(a.Host, pa, b.Host, pb, r); err != nil {
		return Choice{}, fmt.Errorf("%w: %s: their QPs have no path but the devices', and %w", ErrNoPath, both, err)
	}
	return Choice{Kind: Verbs, Reason: fmt.Sprintf("%s on port group %s: their QPs are the devices', %s", both, a.PortGroup, mode), Devices: pair}, nil
}

// oneBound is the path between x, bound to a verbs uplink, and y on
// another host, not bound: y's software RoCEv2 where the device speaks
// RoCE v2 (the wire is the same), none where y's QPs could take only the
// TCP channel.
func oneBound(x, y End) (Choice, error) {
	px, err := boundPort(x)
	if err != nil {
		return Choice{}, err
	}
	dev := bound(x, px) + ": its QPs are the device's"
	hint := ""
	for _, py := range y.Verbs {
		if _, why := match(x.Host, px, y.Host, py); why == "" {
			hint = fmt.Sprintf("; bound to %s (vrdma vm create --uplink %s), %s would take the devices", py.Name, py.Name, y.Adapter)
			break
		}
	}
	if px.Kind == RoCE && px.V2 && len(y.RDMA) > 0 {
		return Choice{Kind: RDMA, Reason: fmt.Sprintf("%s, which RoCE v2 reaches; %s is not bound: its QPs take host %s's software RoCEv2 (%s on port group %s), which is wire-compatible with the device%s", dev, y.Adapter, y.Host, y.RDMA[0], y.PortGroup, hint)}, nil
	}
	var reach string
	switch {
	case px.Kind == RoCE && px.V2:
		reach = fmt.Sprintf("host %s has no RDMA uplink on port group %s, and the TCP channel cannot reach a device's QPs: only RoCE v2 on the wire does (a native RoCE peer, or vrdma's software RoCEv2 on an rxe link)", y.Host, y.PortGroup)
	case px.Kind == RoCE:
		reach = "the device has no RoCE v2 GID: vrdma's software RoCEv2 cannot reach it, nor can the TCP channel"
	default:
		reach = fmt.Sprintf("the device is %s: only a peer device of its kind reaches its QPs, not vrdma's software RoCEv2 nor the TCP channel", px.Kind)
	}
	return Choice{}, fmt.Errorf("%w: %s; %s is not bound and %s%s", ErrNoPath, dev, y.Adapter, reach, hint)
}

// sameHost is the path between two adapters of one host: memcpy between
// the engine's QPs, the device between bound ones, none between the two.
func sameHost(a, b End, r Request) (Choice, error) {
	if a.Bound == "" && b.Bound == "" {
		return Choice{Kind: Memcpy, Reason: fmt.Sprintf("same host %s", a.Host)}, nil
	}
	if a.Bound == "" || b.Bound == "" {
		x, y := a, b
		if x.Bound == "" {
			x, y = b, a
		}
		return Choice{}, fmt.Errorf("%w: same host %s, but %s: its QPs are the device's, and %s is not bound: its QPs are the engine's, which the device does not reach (memcpy joins the engine's QPs only); bind both instances to %s (vrdma vm create --uplink), or neither", ErrNoPath, a.Host, x.Adapter+" is bound to verbs uplink "+x.Bound, y.Adapter, x.Bound)
	}
	pa, err := boundPort(a)
	if err != nil {
		return Choice{}, err
	}
	pb, err := boundPort(b)
	if err != nil {
		return Choice{}, err
	}
	mode := "the device loops it back"
	if pa.Name != pb.Name {
		m, why := match(a.Host, pa, b.Host, pb)
		if why != "" {
			return Choice{}, fmt.Errorf("%w: same host %s, %s and %s: their QPs are the devices', and the devices cannot reach each other: %s", ErrNoPath, a.Host, bound(a, pa), bound(b, pb), why)
		}
		mode = m
	}
	if err := devicesBlocked(a.Host, pa, b.Host, pb, r); err != nil {
		return Choice{}, fmt.Errorf("%w: same host %s, %s and %s: their QPs have no path but the device's, and %w", ErrNoPath, a.Host, bound(a, pa), bound(b, pb), err)
	}
	return Choice{Kind: Verbs, Reason: fmt.Sprintf("same host %s, %s and %s: their QPs are the device's, %s", a.Host, bound(a, pa), bound(b, pb), mode), Devices: &DevicePair{A: pa, B: pb, Mode: mode}}, nil
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
