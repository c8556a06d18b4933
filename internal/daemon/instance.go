package daemon

import (
	"fmt"
	"hash/fnv"
	"net"
	"regexp"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// MaxAdapters is the most adapters one instance can have (vrdma0..vrdma9).
const MaxAdapters = 10

// DefaultInstance is the instance a client attaches to when it names none.
const DefaultInstance = "default"

// Instance is a tenant on this host: it owns adapters; processes attach to it.
type Instance struct {
	Name       string
	Async      bool
	TrustGroup string
	Uplink     string      // the verbs link its adapters are bound to, "" if none
	PortGroup  string      // the switch's port group ("" = the default one)
	Native     bool        // native endpoints (.vmx nativeEndpointSupport)
	Pin        bool        // registered memory must be lockable (.vmx sched.mem.pin)
	LIDRouting bool        // address vectors may name a port by LID alone (lid.go)
	Owner      proto.Owner // who may attach to it, delete it, put it in a trust group
	Temporary  bool        // ends with its creator's session and its last process; never saved
	Adapters   []*engine.Adapter

	// shared: the default instance, open to every user of the socket. Its
	// users may be different uids, so its adapters trust nobody (their
	// engine instance is "", see engine.Adapter.Trusts) and it has no
	// account of its own: each user's uid limits are theirs.
	shared bool
	// creator is the session that created a temporary instance, nil once
	// that session has ended (d.mu).
	creator *session
	acct    *account // what the instance's sessions hold (nil when shared)
	owner   *account // the owner's uid account, charged one instance
}

// spec is what recreates the instance.
func (inst *Instance) spec() proto.InstanceSpec {
	owner := inst.Owner
	return proto.InstanceSpec{Name: inst.Name, Adapters: len(inst.Adapters), Async: inst.Async, TrustGroup: inst.TrustGroup,
		PortGroup: inst.PortGroup, NativeEndpoints: inst.Native, Pin: inst.Pin, LIDRouting: inst.LIDRouting, Owner: &owner, Temporary: inst.Temporary, Uplink: inst.Uplink}
}

var instanceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// validateSpec checks a spec whose names are canonical (names.go).
func validateSpec(s proto.InstanceSpec) error {
	if err := checkName("instance", s.Name); err != nil {
		return err
	}
	if s.TrustGroup != "" {
		if err := checkName("trust group", s.TrustGroup); err != nil {
			return err
		}
	}
	if s.Uplink != "" {
		if err := checkName("uplink", s.Uplink); err != nil {
			return err
		}
	}
	if s.PortGroup != "" {
		if err := checkName("port group", s.PortGroup); err != nil {
			return err
		}
	}
	if s.Adapters < 1 || s.Adapters > MaxAdapters {
		return proto.Errorf(proto.CodeLimit, "instance %s asks for %d adapters: an instance has 1 to %d (vrdma0..vrdma9)", quoteName(s.Name), s.Adapters, MaxAdapters)
	}
	return nil
}

// macFor derives a stable, locally administered unicast MAC for an adapter.
func macFor(host, instance string, index, salt int) [6]byte {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s/%d/%d", host, instance, index, salt)
	v := h.Sum64()
	var m [6]byte
	for i := range m {
		m[i] = byte(v >> (8 * i))
	}
	m[0] = m[0]&^0x01 | 0x02
	return m
}

// adapterInfo is what clients see of a: its port's GID table holds the
// host's first engine.GIDTable GIDs.
func adapterInfo(a *engine.Adapter) proto.AdapterInfo {
	table := a.GIDs()
	table = table[:min(len(table), engine.GIDTable)]
	gids := make([][]byte, len(table))
	for i := range table {
		g := table[i]
		gids[i] = g[:]
	}
	return proto.AdapterInfo{
		Name: a.Name, Index: a.Index, GUID: a.GUID, MAC: net.HardwareAddr(a.MAC[:]).String(),
		GIDs: gids, Async: a.Async, State: "ACTIVE", ActiveMTU: uint8(a.PortMTU()),
	}
}

// deviceAttr is what query_device reports of a, for a tenant whose limits
// are lim: the maxima of objects are the ones the daemon enforces.
func deviceAttr(a *engine.Adapter, lim limitSet) *proto.DeviceAttr {
	return &proto.DeviceAttr{
		FWVer: "1.0.0", NodeGUID: a.GUID, SysImageGUID: a.GUID,
		MaxMRSize: min(engine.MaxMRSize, lim[Locked]), PageSizeCap: 0xfffff000,
		VendorID: 0x1af4, VendorPartID: 0x7672, HWVer: 1,
		MaxQP: int(lim[QPs]), MaxQPWR: engine.MaxQPWR, MaxSGE: engine.MaxSGE,
		MaxCQ: int(lim[CQs]), MaxCQE: engine.MaxCQE, MaxMR: int(lim[MRs]), MaxMW: int(lim[MWs]), MaxPD: int(lim[PDs]),
		MaxQPRdAtom: engine.MaxRdAtomic, MaxQPInitRdAtom: engine.MaxRdAtomic,
		AtomicCap: "ATOMIC_GLOB", MaxSRQ: int(lim[SRQs]), MaxSRQWR: engine.MaxQPWR, MaxSRQSGE: engine.MaxSGE,
		MaxAH: int(lim[AHs]), MaxInline: engine.MaxInline, MaxPKeys: engine.PKeyTable, PhysPortCnt: 1,
		MaxRingBytes: lim[Ring],
		MaxMcastGrp:  engine.MaxMcastGroups, MaxMcastQPAttach: engine.MaxMcastQPAttach,
		MaxTotalMcastQPAttach: int(min(lim[Mcast], engine.MaxTotalMcastQPAttach)),
	}
}

func portAttr(a *engine.Adapter) *proto.PortAttr {
	info := adapterInfo(a)
	return &proto.PortAttr{
		State: "ACTIVE", PhysState: "LINK_UP", MaxMTU: uint8(a.PortMaxMTU()), ActiveMTU: uint8(a.PortMTU()),
		GIDTblLen: engine.GIDTable, PKeyTblLen: engine.PKeyTable, GIDs: info.GIDs, LID: a.LID(),
		LinkLayer: "Ethernet", Rate: "memcpy", Counters: a.Counters.Snapshot(),
	}
}
