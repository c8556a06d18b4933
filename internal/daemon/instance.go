package daemon

import (
	"fmt"
	"hash/fnv"
	"net"
	"regexp"

	"github.com/vrdma/vrdma/internal/abi"
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
	PortGroup  string // the switch's port group ("" = the default one)
	Native     bool   // native endpoints (.vmx nativeEndpointSupport)
	Pin        bool   // registered memory must be lockable (.vmx sched.mem.pin)
	Adapters   []*engine.Adapter
}

// spec is what recreates the instance.
func (inst *Instance) spec() proto.InstanceSpec {
	return proto.InstanceSpec{Name: inst.Name, Adapters: len(inst.Adapters), Async: inst.Async, TrustGroup: inst.TrustGroup,
		PortGroup: inst.PortGroup, NativeEndpoints: inst.Native, Pin: inst.Pin}
}

var instanceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

func validateSpec(s proto.InstanceSpec) error {
	if !instanceName.MatchString(s.Name) {
		return proto.Errorf(proto.CodeInvalid, "instance name %q: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", s.Name)
	}
	if s.TrustGroup != "" && !instanceName.MatchString(s.TrustGroup) {
		return proto.Errorf(proto.CodeInvalid, "trust group %q: use 1-63 letters, digits, '.', '_' or '-'", s.TrustGroup)
	}
	if s.PortGroup != "" && !instanceName.MatchString(s.PortGroup) {
		return proto.Errorf(proto.CodeInvalid, "port group %q: use 1-63 letters, digits, '.', '_' or '-'", s.PortGroup)
	}
	if s.Adapters < 1 || s.Adapters > MaxAdapters {
		return proto.Errorf(proto.CodeLimit, "instance %q asks for %d adapters: an instance has 1 to %d (vrdma0..vrdma9)", s.Name, s.Adapters, MaxAdapters)
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

func adapterInfo(a *engine.Adapter) proto.AdapterInfo {
	table := a.GIDs()
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

func deviceAttr(a *engine.Adapter) *proto.DeviceAttr {
	return &proto.DeviceAttr{
		FWVer: "1.0.0", NodeGUID: a.GUID, SysImageGUID: a.GUID,
		MaxMRSize: engine.MaxMRSize, PageSizeCap: 0xfffff000,
		VendorID: 0x1af4, VendorPartID: 0x7672, HWVer: 1,
		MaxQP: engine.MaxQP, MaxQPWR: engine.MaxQPWR, MaxSGE: engine.MaxSGE,
		MaxCQ: 1 << 14, MaxCQE: engine.MaxCQE, MaxMR: engine.MaxMR, MaxPD: 1 << 14,
		MaxQPRdAtom: engine.MaxRdAtomic, MaxQPInitRdAtom: engine.MaxRdAtomic,
		AtomicCap: "ATOMIC_GLOB", MaxSRQ: 1 << 12, MaxSRQWR: engine.MaxQPWR, MaxSRQSGE: engine.MaxSGE,
		MaxAH: 1 << 16, MaxInline: engine.MaxInline, MaxPKeys: engine.PKeyTable, PhysPortCnt: 1,
	}
}

func portAttr(a *engine.Adapter) *proto.PortAttr {
	info := adapterInfo(a)
	return &proto.PortAttr{
		State: "ACTIVE", PhysState: "LINK_UP", MaxMTU: uint8(abi.MTU4096), ActiveMTU: uint8(a.PortMTU()),
		GIDTblLen: len(info.GIDs), PKeyTblLen: engine.PKeyTable, GIDs: info.GIDs,
		LinkLayer: "Ethernet", Rate: "memcpy", Counters: a.Counters.Snapshot(),
	}
}
