package fabric

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Validation. Each function checks one record on its own; the
// ValidateInstanceIn family also checks it against the rest of the switch.
// Every error is a *ValidationError naming the field, the problem and the fix.

const maxNameLen = 63

// ValidateName checks a record name: 1–63 characters of letters, digits,
// '-', '_' and '.', starting with a letter or digit.
func ValidateName(kind, name string) error {
	fix := "use 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit"
	switch {
	case name == "":
		return invalid(kind, name, "Name", "the name is empty", fix)
	case len(name) > maxNameLen:
		return invalid(kind, name, "Name", fmt.Sprintf("the name is %d characters long", len(name)), fix)
	case !isAlnum(name[0]):
		return invalid(kind, name, "Name", fmt.Sprintf("the name starts with %q", name[0]), fix)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return invalid(kind, name, "Name", fmt.Sprintf("the name contains %q", c), fix)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ValidateSwitch checks a switch record.
func ValidateSwitch(s Switch) error { return ValidateName("switch", s.Name) }

// validMTU reports whether m is a RoCE MTU.
func validMTU(m int) bool {
	switch m {
	case 256, 512, 1024, 2048, 4096:
		return true
	}
	return false
}

const mtuFix = "use 256, 512, 1024, 2048 or 4096 (the RoCE MTU, not the Ethernet MTU: Ethernet 1500 carries 1024, 9000 carries 4096)"

// ValidatePortGroup checks a port group record.
func ValidatePortGroup(p PortGroup) error {
	const k = "port group"
	if err := ValidateName(k, p.Name); err != nil {
		return err
	}
	if p.VLAN > 4094 {
		return invalid(k, p.Name, "VLAN", fmt.Sprintf("VLAN %d is out of range", p.VLAN), "use a VLAN ID between 0 (untagged) and 4094")
	}
	if p.PCP > 7 {
		return invalid(k, p.Name, "PCP", fmt.Sprintf("PCP %d is out of range", p.PCP), "use an 802.1p priority between 0 and 7")
	}
	if p.DSCP > 63 {
		return invalid(k, p.Name, "DSCP", fmt.Sprintf("DSCP %d is out of range", p.DSCP), "use a DSCP between 0 and 63 (26 is common for RoCE)")
	}
	if p.MTU != 0 && !validMTU(p.MTU) {
		return invalid(k, p.Name, "MTU", fmt.Sprintf("MTU %d is not a RoCE MTU", p.MTU), mtuFix+", or 0 for the default 1024")
	}
	if p.PKey != 0 && p.PKey&0x7FFF == 0 {
		return invalid(k, p.Name, "PKey", fmt.Sprintf("P_Key %#04x has no partition number (its low 15 bits are zero)", p.PKey), "use 0xFFFF for the default partition or 0x8001-0xFFFE (full member) / 0x0001-0x7FFF (limited member)")
	}
	return nil
}

// ValidateGID checks one GID in IPv6 notation.
func validateGID(kind, name, field, gid string) error {
	a, err := netip.ParseAddr(gid)
	if err != nil || !a.Is6() && !a.Is4() {
		return invalid(kind, name, field, fmt.Sprintf("GID %q is not an address", gid), "write a GID in IPv6 notation, e.g. fe80::1 or ::ffff:192.0.2.1")
	}
	if a.IsUnspecified() {
		return invalid(kind, name, field, "the GID is all zeros", "leave the GID out or give the uplink's real GID")
	}
	return nil
}

// ValidateHost checks a host record.
func ValidateHost(h Host) error {
	const k = "host"
	if err := ValidateName(k, h.Name); err != nil {
		return err
	}
	if h.Identity.MachineID == "" || h.Identity.BootID == "" {
		return invalid(k, h.Name, "Identity", "the machine id or boot id is empty", "fill Identity from LocalIdentity() on the host itself")
	}
	for i, a := range h.Addrs {
		if _, err := netip.ParseAddr(a); err != nil {
			return invalid(k, h.Name, fmt.Sprintf("Addrs[%d]", i), fmt.Sprintf("%q is not an IP address", a), "give addresses like 192.0.2.10 or 2001:db8::10, without a prefix length")
		}
	}
	hasTCP := false
	seen := map[string]bool{}
	for i, u := range h.Uplinks {
		field := fmt.Sprintf("Uplinks[%d]", i)
		if err := ValidateName("uplink", u.Name); err != nil {
			ve := err.(*ValidationError)
			return invalid(k, h.Name, field+".Name", ve.Problem, ve.Fix)
		}
		if seen[u.Name] {
			return invalid(k, h.Name, field+".Name", fmt.Sprintf("uplink %q appears twice", u.Name), "give every uplink of a host its own name")
		}
		seen[u.Name] = true
		if err := validateUplink(h.Name, field, u); err != nil {
			return err
		}
		hasTCP = hasTCP || u.Kind == UplinkTCP
	}
	if h.Sig != "" && h.Cert == "" {
		return invalid(k, h.Name, "Cert", "the record is signed but carries no certificate", "sign records with a host certificate of the switch (vrdma host cert) and put it in Cert")
	}
	if h.CMEndpoint != "" {
		if _, err := netip.ParseAddrPort(h.CMEndpoint); err != nil {
			return invalid(k, h.Name, "CMEndpoint", fmt.Sprintf("%q is not ip:port", h.CMEndpoint), "leave it empty: it is read from records of older daemons only, whose connection manager listened on TCP")
		}
	}
	if h.TCPEndpoint != "" {
		if _, err := netip.ParseAddrPort(h.TCPEndpoint); err != nil {
			return invalid(k, h.Name, "TCPEndpoint", fmt.Sprintf("%q is not ip:port", h.TCPEndpoint), "give the TCP channel's listening address, e.g. 192.0.2.10:4792 or [2001:db8::10]:4792")
		}
	} else if hasTCP {
		return invalid(k, h.Name, "TCPEndpoint", "the host has a tcp uplink but no TCP channel endpoint", "set TCPEndpoint to the address the daemon's TCP channel listens on")
	}
	return nil
}

// validateVerbsUplink checks a verbs uplink's device fields.
func validateVerbsUplink(host, field string, u Uplink) error {
	const k = "host"
	if u.Device == "" {
		return invalid(k, host, field+".Device", fmt.Sprintf("verbs uplink %q names no device", u.Name), "give the rdma-core device (mlx5_0, rxe0)")
	}
	switch u.LinkLayer {
	case "Ethernet", "InfiniBand", "Unspecified":
	default:
		return invalid(k, host, field+".LinkLayer", fmt.Sprintf("link layer %q on verbs uplink %q", u.LinkLayer, u.Name), `use "Ethernet" or "InfiniBand"`)
	}
	if u.MTU != 0 && !validMTU(u.MTU) {
		return invalid(k, host, field+".MTU", fmt.Sprintf("MTU %d on verbs uplink %q is not an RDMA MTU", u.MTU, u.Name), mtuFix)
	}
	if len(u.GIDTypes) != len(u.GIDs) {
		return invalid(k, host, field+".GIDTypes", fmt.Sprintf("verbs uplink %q has %d GIDs and %d GID types", u.Name, len(u.GIDs), len(u.GIDTypes)), "give one type per GID")
	}
	for j, t := range u.GIDTypes {
		switch t {
		case "IB", "RoCE v1", "RoCE v2":
		default:
			return invalid(k, host, fmt.Sprintf("%s.GIDTypes[%d]", field, j), fmt.Sprintf("GID type %q", t), `use "IB", "RoCE v1" or "RoCE v2"`)
		}
	}
	return validateVerbsDevice(host, field, u)
}

func validateUplink(host, field string, u Uplink) error {
	const k = "host"
	switch u.Kind {
	case UplinkRXE:
		if u.RoCEVersion != 1 && u.RoCEVersion != 2 {
			return invalid(k, host, field+".RoCEVersion", fmt.Sprintf("RoCE version %d on rxe uplink %q", u.RoCEVersion, u.Name), "use 2 (RoCEv2, UDP 4791) or 1")
		}
		if !validMTU(u.MTU) {
			return invalid(k, host, field+".MTU", fmt.Sprintf("MTU %d on rxe uplink %q is not a RoCE MTU", u.MTU, u.Name), mtuFix)
		}
		if len(u.GIDs) == 0 && u.State != UplinkDown {
			// A link whose interface is missing, or whose port is taken,
			// is down and has no GID yet; one that is up has at least one.
			return invalid(k, host, field+".GIDs", fmt.Sprintf("rxe uplink %q is up but has no GID", u.Name), "list the uplink's GIDs (`rdma link show` / sysfs gids), or mark it down")
		}
	case UplinkVerbs:
		if err := validateVerbsUplink(host, field, u); err != nil {
			return err
		}
	case UplinkTCP:
		if u.RoCEVersion != 0 || u.MTU != 0 || len(u.GIDs) != 0 {
			return invalid(k, host, field, fmt.Sprintf("tcp uplink %q has RoCE fields (version, MTU or GIDs)", u.Name), "leave RoCEVersion, MTU and GIDs empty on a tcp uplink")
		}
	default:
		return invalid(k, host, field+".Kind", fmt.Sprintf("unknown uplink kind %q", u.Kind), `use "rxe" (RoCE), "verbs" (a device of the host's rdma-core) or "tcp" (the TCP channel)`)
	}
	for j, g := range u.GIDs {
		if err := validateGID(k, host, fmt.Sprintf("%s.GIDs[%d]", field, j), g); err != nil {
			return err
		}
	}
	switch u.State {
	case "", UplinkUp, UplinkDown:
	default:
		return invalid(k, host, field+".State", fmt.Sprintf("unknown state %q", u.State), `use "up" or "down"`)
	}
	return nil
}

// ValidateInstance checks an instance on its own: its name, host name, and
// adapters (at most MaxAdapters, distinct indexes, MACs and GIDs, each with
// a port group named). Whether the port groups exist is checked by
// ValidateInstanceIn.
func ValidateInstance(in Instance) error {
	const k = "instance"
	if err := ValidateName(k, in.Name); err != nil {
		return err
	}
	if in.Host == "" {
		return invalid(k, in.Name, "Host", "the instance names no host", "set Host to the name of the host the instance runs on")
	}
	if err := ValidateName("host", in.Host); err != nil {
		ve := err.(*ValidationError)
		return invalid(k, in.Name, "Host", ve.Problem, ve.Fix)
	}
	if len(in.Adapters) > MaxAdapters {
		return invalid(k, in.Name, "Adapters", fmt.Sprintf("%d adapters", len(in.Adapters)), fmt.Sprintf("an instance has at most %d adapters (vrdma0..vrdma9): remove %d", MaxAdapters, len(in.Adapters)-MaxAdapters))
	}
	idx := map[int]bool{}
	macs := map[string]int{}
	gids := map[netip.Addr]int{}
	for i, a := range in.Adapters {
		f := fmt.Sprintf("Adapters[%d]", i)
		if a.Index < 0 || a.Index >= MaxAdapters {
			return invalid(k, in.Name, f+".Index", fmt.Sprintf("index %d", a.Index), fmt.Sprintf("use an index between 0 and %d (vrdma0..vrdma%d)", MaxAdapters-1, MaxAdapters-1))
		}
		if idx[a.Index] {
			return invalid(k, in.Name, f+".Index", fmt.Sprintf("two adapters are vrdma%d", a.Index), "give each adapter of an instance its own index")
		}
		idx[a.Index] = true
		mac, err := parseMAC(a.MAC)
		if err != nil {
			return invalid(k, in.Name, f+".MAC", err.Error(), "use a unicast Ethernet address like 02:00:00:00:00:01 (02: is locally administered)")
		}
		if j, dup := macs[mac]; dup {
			return invalid(k, in.Name, f+".MAC", fmt.Sprintf("MAC %s is also vrdma%d's", mac, in.Adapters[j].Index), "give each adapter its own MAC")
		}
		macs[mac] = i
		for g, s := range a.GIDs {
			gf := fmt.Sprintf("%s.GIDs[%d]", f, g)
			if err := validateGID(k, in.Name, gf, s); err != nil {
				return err
			}
			ga, _ := netip.ParseAddr(s)
			if j, dup := gids[ga.Unmap()]; dup {
				return invalid(k, in.Name, gf, fmt.Sprintf("GID %s is also vrdma%d's", s, in.Adapters[j].Index), "give each adapter its own GIDs")
			}
			gids[ga.Unmap()] = i
		}
		if a.PortGroup == "" {
			return invalid(k, in.Name, f+".PortGroup", fmt.Sprintf("vrdma%d is attached to no port group", a.Index), "set PortGroup to one of the switch's port groups (`vrdma switch` lists them)")
		}
		if a.Uplink != "" {
			if err := ValidateName("uplink", a.Uplink); err != nil {
				ve := err.(*ValidationError)
				return invalid(k, in.Name, f+".Uplink", ve.Problem, ve.Fix)
			}
		}
	}
	return nil
}

// parseMAC returns the canonical form of a unicast 48-bit MAC.
func parseMAC(s string) (string, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("%q is not a 48-bit MAC address", s)
	}
	if hw[0]&1 != 0 {
		return "", fmt.Errorf("%s is a multicast address", hw)
	}
	if strings.Trim(hw.String(), "0:") == "" {
		return "", fmt.Errorf("the MAC is all zeros")
	}
	return hw.String(), nil
}

// ValidateInstanceIn checks an instance against the switch: everything
// ValidateInstance checks, plus that every adapter's port group exists and
// that no adapter of another instance already has one of its MACs or GIDs.
// others may include an older version of in itself (same name); it is
// skipped.
func ValidateInstanceIn(in Instance, groups []PortGroup, others []Instance) error {
	if err := ValidateInstance(in); err != nil {
		return err
	}
	const k = "instance"
	known := make(map[string]bool, len(groups))
	names := make([]string, 0, len(groups))
	for _, g := range groups {
		known[g.Name] = true
		names = append(names, g.Name)
	}
	for i, a := range in.Adapters {
		if !known[a.PortGroup] {
			fix := "create it first (`vrdma portgroup add " + a.PortGroup + "`)"
			if len(names) > 0 {
				fix += " or use one of: " + strings.Join(names, ", ")
			}
			return invalid(k, in.Name, fmt.Sprintf("Adapters[%d].PortGroup", i), fmt.Sprintf("unknown port group %q", a.PortGroup), fix)
		}
	}
	type owner struct {
		inst string
		idx  int
	}
	macs := map[string]owner{}
	gids := map[netip.Addr]owner{}
	for _, o := range others {
		if o.Name == in.Name {
			continue
		}
		for _, a := range o.Adapters {
			if m, err := parseMAC(a.MAC); err == nil {
				macs[m] = owner{o.Name, a.Index}
			}
			for _, g := range a.GIDs {
				if ga, err := netip.ParseAddr(g); err == nil {
					gids[ga.Unmap()] = owner{o.Name, a.Index}
				}
			}
		}
	}
	for i, a := range in.Adapters {
		m, _ := parseMAC(a.MAC)
		if o, dup := macs[m]; dup {
			return invalid(k, in.Name, fmt.Sprintf("Adapters[%d].MAC", i), fmt.Sprintf("MAC %s is already vrdma%d's of instance %q", m, o.idx, o.inst), "pick a MAC no other adapter on the switch uses")
		}
		for j, g := range a.GIDs {
			ga, _ := netip.ParseAddr(g)
			if o, dup := gids[ga.Unmap()]; dup {
				return invalid(k, in.Name, fmt.Sprintf("Adapters[%d].GIDs[%d]", i, j), fmt.Sprintf("GID %s is already vrdma%d's of instance %q", g, o.idx, o.inst), "pick a GID no other adapter on the switch uses")
			}
		}
	}
	return nil
}
