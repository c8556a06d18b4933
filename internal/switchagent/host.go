package switchagent

import (
	"log/slog"
	"net/netip"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fabric"
)

// Host is what the agent needs of the daemon it runs in: the engine's
// host, to route packets and attach the TCP channel, and what the host
// record announces. The daemon implements it; the agent calls it without
// holding a lock of its own except in Uplinks (see the lock order in
// doc.go).
type Host interface {
	// SetRouter installs the engine's router (nil: none): the agent's
	// route table while it is on the switch.
	SetRouter(engine.Router)
	// SetMembers installs the engine's membership test (nil: none): on a
	// switch with certificates, the addresses its hosts publish.
	SetMembers(engine.Members)
	// FailPeers moves every connected QP whose destination GID gone
	// matches to the error state, with reason, and returns how many.
	FailPeers(gone func(netip.Addr) bool, reason string) int
	// AttachLink attaches an open link (the TCP channel) to the engine
	// and serves its packets until it is removed.
	AttachLink(engine.Link) error
	// RemoveLink detaches and closes the link called name.
	RemoveLink(name string) error
	// Uplinks lists the host's RDMA links (`vrdma link add`), open or
	// not, in any order. The agent publishes them in the host record and
	// routes by their GIDs.
	Uplinks() []Uplink
	// LIDsChanged says that the switch's LIDs changed: the daemon asks
	// LocalLID for its adapters' again.
	LIDsChanged()
}

// Uplink is one of the host's RDMA links.
type Uplink struct {
	Name string
	// Link is the open link, nil when it could not be opened (its port
	// was taken, say): the record then says it is down.
	Link engine.Link
	// Verbs is a verbs uplink's device (Link is nil then): nil for the
	// others.
	Verbs *VerbsUplink
}

// VerbsUplink is a verbs uplink's device as the record carries it.
type VerbsUplink struct {
	Device    string
	LinkLayer string // "Ethernet", "InfiniBand"
	Transport string // "InfiniBand" (IB and RoCE), "iWARP"
	Up        bool   // the port is active
	MTU       int    // active MTU in bytes
	LID       uint16
	GIDs      [][16]byte
	GIDTypes  []string // "IB", "RoCE v1", "RoCE v2", one per GID
	// InfiniBand: the subnet manager's LID and the subnet prefix
	// ("fe80:0000:0000:0000").
	SMLID        uint16
	SubnetPrefix string
	// Subnets are the IP prefixes of the device's netdev (masked).
	Subnets []netip.Prefix
	// Caps is what the device can do for QPs; nil if not known.
	Caps *fabric.VerbsCaps
	// CarriesQPs: the daemon carries instances' QPs on the device, and
	// Carries what of them (pathsel.Carried()).
	CarriesQPs bool
	Carries    []string
}

// Local is the daemon an agent runs in.
type Local struct {
	HostName string // this host's name on the switch
	// StateDir is the daemon's state directory: the embedded etcd keeps
	// its data in STATE-DIR/etcd unless Config.EtcdDir says otherwise.
	// "": a temporary directory, removed when the agent leaves.
	StateDir string
	Host     Host
	Logger   *slog.Logger // nil: none
}
