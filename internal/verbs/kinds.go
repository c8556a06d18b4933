package verbs

import "fmt"

// Atomic capabilities (enum ibv_atomic_cap).
const (
	AtomicNone   = 0 // IBV_ATOMIC_NONE: iWARP, siw
	AtomicHCA    = 1 // IBV_ATOMIC_HCA
	AtomicGlobal = 2 // IBV_ATOMIC_GLOB
)

// Transports beyond IB and iWARP that rdma-core names (enum
// ibv_transport_type): no verbs uplink takes them.
const (
	TransportUnknown     = -1
	TransportUSNIC       = 2
	TransportUSNICUDP    = 3
	TransportUnspecified = 4
)

// SubnetPrefix is an InfiniBand port's subnet prefix, the upper 64 bits of
// its GID 0, as sysfs's subnet_prefix prints it ("fe80:0000:0000:0000"),
// or "" for a port that is not InfiniBand or has no GID 0.
func SubnetPrefix(p PortAttr) string {
	if p.LinkLayer != LinkLayerInfiniBand {
		return ""
	}
	for _, g := range p.GIDs {
		if g.Index == 0 {
			b := g.GID
			return fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7])
		}
	}
	return ""
}

// CheckUplink refuses a device a verbs uplink cannot use: one whose
// transport is neither InfiniBand (IB and RoCE) nor iWARP (usNIC's, or one
// rdma-core does not know), which carries no RC QPs through verbs.
func CheckUplink(name string, a DeviceAttr) error {
	if a.Transport == TransportIB || a.Transport == TransportIWARP {
		return nil
	}
	return &Error{Kind: ErrUnsupported, Msg: fmt.Sprintf("%s has transport %s: a verbs uplink needs an InfiniBand, RoCE or iWARP device (`ibv_devinfo -d %s` shows its transport)", name, TransportName(a.Transport), name)}
}
