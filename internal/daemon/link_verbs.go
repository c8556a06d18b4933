package daemon

// Verbs links: a port of a device of the host's own rdma-core (`vrdma link
// add NAME type verbs dev IBDEV [port N]`), driven through the helper of
// package verbs (docs/design/verbs-uplink.md). This first slice opens the
// device and reports it; the data path on the device comes next.

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pathsel"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/switchagent"
	"github.com/vrdma/vrdma/internal/verbs"
)

// verbsLinkType is the link type of a device of the host's rdma-core.
const verbsLinkType = "verbs"

// verbsLink is a verbs link's open device and what its port said last.
type verbsLink struct {
	mu   sync.Mutex
	dev  *verbs.Device
	port verbs.PortAttr
	err  error                // the last query's failure; the link is down while set
	eng  *engine.DeviceUplink // what instances bound to the link use (link_verbs_bind.go)
	// fault is why the device went away (link_verbs_fault.go); the link
	// is down for good while set: re-adding it opens the device again.
	fault error

	cmMu  sync.Mutex    // guards cm and cmDev (cm_device_route.go)
	cm    *deviceCM     // the device's CM, opened on first use
	cmDev *verbs.Device // the device cm is on
}

func validateVerbsLink(spec proto.LinkSpec) error {
	if spec.Dev == "" {
		return proto.Errorf(proto.CodeInvalid, "link %s: no dev: say which rdma-core device, `dev mlx5_0` (`ibv_devices` lists them)", spec.Name)
	}
	if len(spec.Dev) > 64 || strings.ContainsAny(spec.Dev, "/: \t\n\x00") {
		return proto.Errorf(proto.CodeInvalid, "link %s: dev %s is no device name (at most 64 characters, no '/', ':' or space): `ibv_devices` lists them", spec.Name, quoteName(spec.Dev))
	}
	if spec.Netdev != "" || spec.DSCP != 0 {
		return proto.Errorf(proto.CodeInvalid, "link %s: netdev and dscp are for rxe links; a verbs link takes dev and port (the device has its own netdev)", spec.Name)
	}
	return nil
}

// verbsPort is the spec's device port, 1 if not given.
func verbsPort(spec proto.LinkSpec) uint8 {
	if spec.DevPort == 0 {
		return 1
	}
	return spec.DevPort
}

// sameVerbsPort reports whether a and b are verbs links on one port.
func sameVerbsPort(a, b proto.LinkSpec) bool {
	return a.Type == verbsLinkType && b.Type == verbsLinkType && a.Dev == b.Dev && verbsPort(a) == verbsPort(b)
}

// openVerbsLink starts the helper, opens e's device and reads its port.
func (t *linkTable) openVerbs(e *linkEntry) error {
	dev, err := verbs.Open(t.cfg.VerbsHelper, t.cfg.BuildVerbsHelper, e.spec.Dev, verbsPort(e.spec))
	if err != nil {
		return verbsLinkError(e.spec, err)
	}
	if err := verbs.CheckUplink(e.spec.Dev, dev.Attr); err != nil {
		dev.Close()
		return verbsLinkError(e.spec, err)
	}
	port, err := dev.QueryPort()
	if err != nil {
		dev.Close()
		return verbsLinkError(e.spec, err)
	}
	u := engine.NewDeviceUplink(e.spec.Name, dev, gidTable(port))
	u.Dev = e.spec.Dev
	u.SetMTU(abi.MTU(port.ActiveMTU), abi.MTU(port.MaxMTU))
	e.verbs.mu.Lock()
	e.verbs.dev, e.verbs.port, e.verbs.err, e.verbs.fault = dev, port, nil, nil
	e.verbs.eng = u
	e.verbs.mu.Unlock()
	t.watchVerbs(e.spec, &e.verbs, u)
	e.problem = ""
	return nil
}

// verbsLinkError gives a failed verbs link its command code.
func verbsLinkError(spec proto.LinkSpec, err error) error {
	code := proto.CodeInternal
	switch {
	case errors.Is(err, verbs.ErrNoDevice):
		code = proto.CodeNotFound
	case errors.Is(err, verbs.ErrUnsupported):
		code = proto.CodeInvalid
	case errors.Is(err, verbs.ErrNoRDMACore), errors.Is(err, verbs.ErrBuild):
		code = proto.CodeState
	case errors.Is(err, verbs.ErrDevice):
		code = proto.CodePermission
		var ve *verbs.Error
		if errors.As(err, &ve) && ve.Errno != 1 && ve.Errno != 13 { // EPERM, EACCES
			code = proto.CodeInternal
		}
	}
	return proto.Errorf(code, "link %s on %s port %d: %v", spec.Name, spec.Dev, verbsPort(spec), err)
}

// refreshVerbsLinks reads the ports of the verbs links (the one called
// name, if not "") again, outside the links' lock: a helper that is slow to
// answer holds up only this listing, not the switch's view of the links.
func (t *linkTable) refreshVerbs(name string) {
	var vs []*verbsLink
	t.mu.Lock()
	for _, e := range t.m {
		if e.spec.Type == verbsLinkType && (name == "" || e.spec.Name == name) {
			vs = append(vs, &e.verbs)
		}
	}
	t.mu.Unlock()
	for _, v := range vs {
		v.refresh()
	}
}

// refresh reads the port again (its state and GIDs change with the
// netdev's addresses); a failure is kept and shown, the link down.
func (v *verbsLink) refresh() {
	v.mu.Lock()
	dev := v.dev
	v.mu.Unlock()
	if dev == nil {
		return
	}
	p, err := dev.QueryPort() // not under v.mu: snapshot does not wait on the helper
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dev != dev {
		return // closed meanwhile
	}
	v.err = err
	if err == nil {
		v.port = p
		if v.eng != nil {
			v.eng.SetGIDs(gidTable(p))
			v.eng.SetMTU(abi.MTU(p.ActiveMTU), abi.MTU(p.MaxMTU))
		}
	}
}

// close fails the instances bound to the link for reason (their QPs get
// DEVICE_FATAL and flush) and stops the helper.
func (v *verbsLink) close(reason error) {
	v.mu.Lock()
	u := v.eng
	v.mu.Unlock()
	if u != nil {
		u.DeviceFatal(reason) // not under v.mu: the link is told
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dev != nil {
		v.dev.Close()
		v.dev = nil
	}
}

// snapshot returns the device's attributes and port as last read, with
// the last query's failure; ok is false when there is no device.
func (v *verbsLink) snapshot() (attr verbs.DeviceAttr, name string, port verbs.PortAttr, err error, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dev == nil {
		return attr, "", port, nil, false
	}
	if v.fault != nil {
		return v.dev.Attr, v.dev.Name, v.port, v.fault, true
	}
	return v.dev.Attr, v.dev.Name, v.port, v.err, true
}

// verbsLinkInfo fills in a verbs link's state and device.
func (t *linkTable) verbsInfo(e *linkEntry, info proto.LinkInfo) proto.LinkInfo {
	attr, name, p, err, ok := e.verbs.snapshot()
	if !ok {
		return info
	}
	vi := &proto.VerbsLinkInfo{Dev: name, Port: verbsPort(e.spec), Transport: verbs.TransportName(attr.Transport),
		LinkLayer: verbs.LinkLayerName(p.LinkLayer), PortState: verbs.PortStateName(p.State), FWVer: attr.FWVer,
		NodeGUID: attr.NodeGUID, LID: uint16(p.LID), MaxMTU: uint8(p.MaxMTU), AtomicCap: attr.AtomicCap, GIDs: []proto.VerbsGID{}}
	for _, g := range p.GIDs {
		vg := proto.VerbsGID{Index: g.Index, Type: verbs.GIDTypeName(g.Type), GID: append([]byte(nil), g.GID[:]...)}
		if g.Ifindex != 0 {
			if ifc, err := net.InterfaceByIndex(int(g.Ifindex)); err == nil {
				vg.Netdev = ifc.Name
			}
		}
		vi.GIDs = append(vi.GIDs, vg)
		info.GIDs = append(info.GIDs, vg.GID)
	}
	info.Verbs = vi
	info.ActiveMTU = uint8(p.ActiveMTU)
	info.PhysState = "LINK_UP"
	if p.PhysState != 5 { // IBV_PORT_PHYS_STATE_LINK_UP
		info.PhysState = "DISABLED"
	}
	if err != nil {
		info.Problem = err.Error()
		return info
	}
	if p.State == 4 { // IBV_PORT_ACTIVE
		info.State = "ACTIVE"
	}
	return info
}

// uplink is the link as the switch's host record carries it (its port as
// last read: the switch does not wait on the helper).
func (v *verbsLink) uplink(spec proto.LinkSpec) *switchagent.VerbsUplink {
	attr, _, p, err, ok := v.snapshot()
	u := &switchagent.VerbsUplink{Device: spec.Dev, LinkLayer: "Unspecified"}
	if !ok {
		return u
	}
	u.LinkLayer, u.Transport = verbs.LinkLayerName(p.LinkLayer), verbs.TransportName(attr.Transport)
	u.Up = err == nil && p.State == 4 // IBV_PORT_ACTIVE
	if p.ActiveMTU >= 1 && p.ActiveMTU <= 5 {
		u.MTU = 128 << p.ActiveMTU
	}
	u.LID, u.SMLID = uint16(p.LID), uint16(p.SMLID)
	for _, g := range p.GIDs {
		u.GIDs = append(u.GIDs, g.GID)
		u.GIDTypes = append(u.GIDTypes, verbs.GIDTypeName(g.Type))
	}
	u.SubnetPrefix = verbs.SubnetPrefix(p)
	u.Subnets = netdevSubnets(p)
	u.Caps = &fabric.VerbsCaps{Atomic: atomicName(attr.AtomicCap), MaxSGE: int(attr.MaxSGE), MaxQPWR: int(attr.MaxQPWR)}
	u.Carries = pathsel.Carried()
	u.CarriesQPs = slices.Contains(u.Carries, pathsel.FeatureRC)
	return u
}

// atomicName names ibv_device_attr.atomic_cap as the host record does.
func atomicName(c uint32) string {
	switch c {
	case verbs.AtomicHCA:
		return fabric.AtomicHCA
	case verbs.AtomicGlobal:
		return fabric.AtomicGlobal
	}
	return fabric.AtomicNone
}

// netdevSubnets lists the IP prefixes of the netdevs the port's GIDs
// belong to (RoCE, iWARP), each once: RoCE v1 GIDs of two hosts in one of
// them are on one L2 segment.
func netdevSubnets(p verbs.PortAttr) []netip.Prefix {
	var out []netip.Prefix
	seen := map[uint32]bool{}
	for _, g := range p.GIDs {
		if g.Ifindex == 0 || seen[g.Ifindex] {
			continue
		}
		seen[g.Ifindex] = true
		ifc, err := net.InterfaceByIndex(int(g.Ifindex))
		if err != nil {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if pr, err := netip.ParsePrefix(a.String()); err == nil && !pr.Addr().IsLinkLocalUnicast() && !slices.Contains(out, pr.Masked()) {
				out = append(out, pr.Masked())
			}
		}
	}
	return out
}
