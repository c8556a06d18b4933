package fabric

import (
	"fmt"
	"net/netip"
)

// maxVerbsSubnets bounds a verbs uplink's IP prefixes: a netdev with more
// is not one path selection needs to read all of.
const maxVerbsSubnets = 64

// validateVerbsDevice checks the fields path selection reads of a verbs
// uplink's device: transport, IB subnet, IP prefixes and capabilities.
func validateVerbsDevice(host, field string, u Uplink) error {
	const k = "host"
	switch u.Transport {
	case "", "InfiniBand", "iWARP":
	default:
		return invalid(k, host, field+".Transport", fmt.Sprintf("transport %q on verbs uplink %q", u.Transport, u.Name), `use "InfiniBand" (IB and RoCE) or "iWARP"`)
	}
	if u.SubnetPrefix != "" && !validSubnetPrefix(u.SubnetPrefix) {
		return invalid(k, host, field+".SubnetPrefix", fmt.Sprintf("subnet prefix %q on verbs uplink %q", u.SubnetPrefix, u.Name), `give four groups of four hex digits, "fe80:0000:0000:0000"`)
	}
	if len(u.Subnets) > maxVerbsSubnets {
		return invalid(k, host, field+".Subnets", fmt.Sprintf("verbs uplink %q has %d subnets", u.Name, len(u.Subnets)), fmt.Sprintf("list at most %d", maxVerbsSubnets))
	}
	for j, s := range u.Subnets {
		if p, err := netip.ParsePrefix(s); err != nil || p != p.Masked() {
			return invalid(k, host, fmt.Sprintf("%s.Subnets[%d]", field, j), fmt.Sprintf("%q is not an IP prefix", s), `give it in CIDR form with the host bits zero, "10.47.91.0/24"`)
		}
	}
	if len(u.Carries) > maxVerbsCarries {
		return invalid(k, host, field+".Carries", fmt.Sprintf("verbs uplink %q names %d features it carries", u.Name, len(u.Carries)), fmt.Sprintf("list at most %d", maxVerbsCarries))
	}
	for j, f := range u.Carries {
		if !validFeature(f) {
			return invalid(k, host, fmt.Sprintf("%s.Carries[%d]", field, j), fmt.Sprintf("%q is no feature name", f), `name features as path selection does, "RC QPs", "atomics" (at most 32 printable characters)`)
		}
	}
	if c := u.Caps; c != nil {
		switch c.Atomic {
		case AtomicNone, AtomicHCA, AtomicGlobal:
		default:
			return invalid(k, host, field+".Caps.Atomic", fmt.Sprintf("atomic capability %q on verbs uplink %q", c.Atomic, u.Name), `use "none", "hca" or "global"`)
		}
		const most = 1 << 24
		for _, v := range []struct {
			name string
			n    int
		}{{"MaxSGE", c.MaxSGE}, {"MaxQPWR", c.MaxQPWR}, {"MaxInline", c.MaxInline}} {
			if v.n < 0 || v.n > most {
				return invalid(k, host, field+".Caps."+v.name, fmt.Sprintf("%s %d on verbs uplink %q", v.name, v.n, u.Name), fmt.Sprintf("give 0..%d", most))
			}
		}
	}
	return nil
}

// maxVerbsCarries bounds the features a verbs uplink says it carries.
const maxVerbsCarries = 32

// validFeature: a feature name is short printable ASCII.
func validFeature(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// validSubnetPrefix: "xxxx:xxxx:xxxx:xxxx" in hex, as sysfs's
// subnet_prefix prints it.
func validSubnetPrefix(s string) bool {
	if len(s) != 19 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i%5 == 4 {
			if c != ':' {
				return false
			}
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
