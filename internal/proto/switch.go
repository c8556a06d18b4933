package proto

// The distributed switch's commands (switch_show, portgroup_*, host_list,
// path). The types mirror the switch's records without importing them, so
// that the library does not link the etcd client.

// SwitchInfo is what `vrdma switch show` prints.
type SwitchInfo struct {
	Name       string   `json:"name"`
	Endpoints  []string `json:"endpoints"`
	Embedded   bool     `json:"embedded"`
	Host       string   `json:"host"`    // this daemon's host
	SMHost     string   `json:"sm_host"` // the subnet manager's holder ("" while none)
	SMPriority int      `json:"sm_prio"` // its priority
	Role       string   `json:"role"`    // this daemon's: "master", "standby", ...
	Hosts      int      `json:"hosts"`   // live hosts
	PortGroups int      `json:"portgroups"`
	Instances  int      `json:"instances"`
	Fallbacks  uint64   `json:"fallbacks"`  // connections this host sent over tcp for want of an RDMA uplink
	HostsGone  uint64   `json:"hosts_gone"` // hosts this daemon saw leave
	SMReport   string   `json:"sm_report,omitempty"`
	LeaseLost  uint64   `json:"lease_lost"` // times this host's lease ended and it registered again
	// SMCandidates are the hosts standing, as host(priority); SMElection
	// the election's keys, oldest (the holder) first.
	SMCandidates []string `json:"sm_candidates,omitempty"`
	SMElection   []string `json:"sm_election,omitempty"`
	// Security says how the daemons of the switch authenticate each other;
	// Channel is what the TCP channel's listener let in and refused.
	Security string        `json:"security"`
	Channel  ListenerStats `json:"channel"`
	// Outsiders are what came over RoCEv2 from outside a switch with
	// certificates (an address no member host publishes) and was dropped.
	Outsiders OutsiderStats `json:"outsiders"`
}

// OutsiderStats count what was dropped from outside the switch: CM
// requests for a listener, and packets for a QP, that is not a native
// endpoint.
type OutsiderStats struct {
	Requests uint64 `json:"requests"`
	Packets  uint64 `json:"packets"`
}

// ListenerStats are what a listener between daemons let in and refused.
type ListenerStats struct {
	Listen       string `json:"listen,omitempty"` // its address ("" = none)
	Peers        int    `json:"peers"`            // connected peers, or open inbound connections
	Accepted     uint64 `json:"accepted"`         // connections authorized
	Refused      uint64 `json:"refused"`          // turned away in their handshake: TLS, protocol, too many from one source
	Cut          uint64 `json:"cut"`              // cut in their handshake to admit newer ones
	Unauthorized uint64 `json:"unauthorized"`     // not a live host of the switch, or claiming another's addresses
	WrongPeer    uint64 `json:"wrong_peer"`       // dialled, and another host answered
	Dropped      uint64 `json:"dropped"`          // idle peers or connections let go
	Spoofed      uint64 `json:"spoofed"`          // frames from an address the sending peer does not own, dropped
}

// PortGroupSpec is a port group of the switch.
type PortGroupSpec struct {
	Name string `json:"name"`
	VLAN uint16 `json:"vlan"`
	PCP  uint8  `json:"pcp"`
	DSCP uint8  `json:"dscp"`
	MTU  int    `json:"mtu,omitempty"`
	PKey uint16 `json:"pkey,omitempty"`
	// Adapters counts the adapters attached (list only).
	Adapters int `json:"adapters,omitempty"`
}

type PortGroupListResp struct {
	PortGroups []PortGroupSpec `json:"portgroups"`
}

// UplinkInfo is one uplink of a host record.
type UplinkInfo struct {
	Name  string   `json:"name"`
	Kind  string   `json:"kind"` // "rxe", "verbs" or "tcp"
	State string   `json:"state"`
	MTU   int      `json:"mtu,omitempty"`
	GIDs  []string `json:"gids,omitempty"`
	// A verbs uplink's device, link layer and GID types (one per GID).
	Device    string   `json:"device,omitempty"`
	LinkLayer string   `json:"link_layer,omitempty"`
	GIDTypes  []string `json:"gid_types,omitempty"`
	// A verbs uplink's transport ("InfiniBand", "iWARP"); InfiniBand: its
	// LID, its subnet manager's and the subnet prefix; the IP subnets of
	// its netdev; what its device can do for QPs; and whether the daemon
	// carries QPs on it (the data path).
	Transport    string         `json:"transport,omitempty"`
	LID          uint16         `json:"lid,omitempty"`
	SMLID        uint16         `json:"sm_lid,omitempty"`
	SubnetPrefix string         `json:"subnet_prefix,omitempty"`
	Subnets      []string       `json:"subnets,omitempty"`
	Caps         *VerbsCapsInfo `json:"caps,omitempty"`
	CarriesQPs   bool           `json:"carries_qps,omitempty"`
	// Carries names what the daemon carries of QPs on the device ("RC
	// QPs", "atomics", ...).
	Carries []string `json:"carries,omitempty"`
}

// VerbsCapsInfo is what a verbs uplink's device can do for QPs.
type VerbsCapsInfo struct {
	Atomic    string `json:"atomic"` // "none", "hca", "global"
	MaxSGE    int    `json:"max_sge"`
	MaxQPWR   int    `json:"max_qp_wr"`
	MaxInline int    `json:"max_inline,omitempty"` // 0: not known yet
}

// HostInfo is a live host as `vrdma host show` prints it.
type HostInfo struct {
	Name        string       `json:"name"`
	Identity    string       `json:"identity"`
	Addrs       []string     `json:"addrs,omitempty"`
	Uplinks     []UplinkInfo `json:"uplinks,omitempty"`
	TCPEndpoint string       `json:"tcp_endpoint,omitempty"`
	SM          bool         `json:"sm,omitempty"`
	Self        bool         `json:"self,omitempty"`
	// Path is how this daemon's adapters reach the host's, and why.
	Path string `json:"path,omitempty"`
	// Bound is, for each verbs uplink of this daemon's host, how instances
	// bound to it reach the host's instances (none for this host itself).
	Bound []BoundPath `json:"bound,omitempty"`
}

type HostListResp struct {
	Hosts []HostInfo `json:"hosts"`
}

// PathReq names two adapters as INSTANCE/vrdmaN (or INSTANCE for vrdma0).
type PathReq struct {
	A string `json:"a"`
	B string `json:"b"`
	// Request is what the QPs ask of the path; nil: nothing special.
	Request *PathRequest `json:"request,omitempty"`
}

// PathRequest is what an instance's QPs ask of a path (pathsel.Request):
// MTU 0 is the adapters' port group's path MTU.
type PathRequest struct {
	UD        bool `json:"ud,omitempty"`
	SRQ       bool `json:"srq,omitempty"`
	Atomics   bool `json:"atomics,omitempty"`
	MaxInline int  `json:"max_inline,omitempty"`
	MaxSGE    int  `json:"max_sge,omitempty"`
	MTU       int  `json:"mtu,omitempty"`
}

// PathResp is the path between two adapters and why.
type PathResp struct {
	Kind   string `json:"kind"` // "memcpy", "verbs", "rdma" or "tcp"
	Reason string `json:"reason"`
	HostA  string `json:"host_a"`
	HostB  string `json:"host_b"`
	// UplinkA and UplinkB are the verbs uplinks the adapters' instances
	// are bound to ("" if not bound): a bound adapter's QPs are the
	// device's.
	UplinkA string `json:"uplink_a,omitempty"`
	UplinkB string `json:"uplink_b,omitempty"`
	// Devices is the pair of verbs uplinks the hosts' devices could use,
	// when one matches; Blocked says why the path does not take them.
	Devices *PathDevices `json:"devices,omitempty"`
}

// BoundPath is how instances bound to Uplink, a verbs uplink of the
// daemon's host, reach another host's instances: those bound to a verbs
// uplink there, and those not bound ("KIND: reason", or "none: why").
type BoundPath struct {
	Uplink    string `json:"uplink"`
	ToBound   string `json:"to_bound"`
	ToUnbound string `json:"to_unbound"`
}

// PathDevices is a pair of matching verbs uplinks (A on HostA, B on
// HostB), how they reach each other ("RoCE v2", "InfiniBand (...)") and
// why the path does not take them ("" when it does).
type PathDevices struct {
	A       string `json:"a"`
	B       string `json:"b"`
	DeviceA string `json:"device_a"`
	DeviceB string `json:"device_b"`
	Mode    string `json:"mode"`
	Blocked string `json:"blocked,omitempty"`
}

// McastListResp is the switch's record of multicast groups
// (`vrdma mcast show`): every tenant's for an administrator, the caller's
// own tenant's for anyone else.
type McastListResp struct {
	Groups []McastGroupInfo `json:"groups"`
}

// McastGroupInfo is one tenant's group on one host.
type McastGroupInfo struct {
	Group  string `json:"group"`  // its IP address (239.1.2.3, ff0e::1)
	Tenant string `json:"tenant"` // "uid N"
	Host   string `json:"host"`
	QPs    int    `json:"qps"` // the tenant's QPs attached there
}
