package switchagent

import (
	"net/netip"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pathsel"
)

// verbsPorts lists a host's verbs uplinks that are up, as path selection
// reads them (every uplink carries every port group, as rxe uplinks do).
// The record is validated (or is this host's own), so what does not parse
// is only left out.
func verbsPorts(h fabric.Host) []pathsel.Port {
	var out []pathsel.Port
	for _, u := range h.Uplinks {
		if u.Kind != fabric.UplinkVerbs || u.State == fabric.UplinkDown || u.Device == "" {
			continue
		}
		out = append(out, verbsPort(u))
	}
	return out
}

// verbsPort is what path selection needs of one verbs uplink.
func verbsPort(u fabric.Uplink) pathsel.Port {
	p := pathsel.Port{Name: u.Name, Device: u.Device, Kind: deviceKind(u), LID: u.LID, SMLID: u.SMLID,
		SubnetPrefix: u.SubnetPrefix, MTU: u.MTU}
	switch {
	case len(u.Carries) > 0:
		p.Carries = append([]string(nil), u.Carries...)
	case u.CarriesQPs:
		p.Carries = []string{pathsel.FeatureRC} // a record without the list
	}
	if c := u.Caps; c != nil {
		p.Atomics = c.Atomic == fabric.AtomicHCA || c.Atomic == fabric.AtomicGlobal
		p.MaxSGE, p.MaxInline = c.MaxSGE, c.MaxInline
	}
	for i, s := range u.GIDs {
		if i >= len(u.GIDTypes) {
			break
		}
		g, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		switch u.GIDTypes[i] {
		case "RoCE v2":
			p.V2 = true
		case "RoCE v1":
			if !g.Unmap().IsLinkLocalUnicast() {
				p.V1 = append(p.V1, g.Unmap())
			}
		}
	}
	for _, s := range u.Subnets {
		if pr, err := netip.ParsePrefix(s); err == nil {
			p.Subnets = append(p.Subnets, pr.Masked())
		}
	}
	return p
}

// deviceKind is a verbs uplink's device kind from its transport and link
// layer: iWARP, InfiniBand, or RoCE (InfiniBand transport over Ethernet).
func deviceKind(u fabric.Uplink) string {
	switch {
	case u.Transport == "iWARP":
		return pathsel.IWARP
	case u.LinkLayer == "InfiniBand":
		return pathsel.IB
	case u.LinkLayer == "Ethernet":
		return pathsel.RoCE
	}
	return u.LinkLayer
}
