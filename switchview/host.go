package switchview

// Host is a live host of the switch, with the path from the daemon's
// (`vrdma host show`).
type Host struct {
	Name        string   `json:"name"`
	Identity    string   `json:"identity"`
	Addrs       []string `json:"addrs,omitempty"`
	Uplinks     []Uplink `json:"uplinks,omitempty"`
	TCPEndpoint string   `json:"tcp_endpoint,omitempty"`
	SM          bool     `json:"sm,omitempty"`   // holds the subnet manager
	Self        bool     `json:"self,omitempty"` // the daemon's own host
	// Path is how this daemon's adapters reach the host's, and why.
	Path string `json:"path,omitempty"`
	// Bound is, for each verbs uplink of this daemon's host, how instances
	// bound to it reach the host's instances (none for this host itself).
	Bound []BoundPath `json:"bound,omitempty"`
}

// HostList is the switch's live hosts (`vrdma host show --json`).
type HostList struct {
	Hosts []Host `json:"hosts"`
}

// Uplink is one uplink of a host.
type Uplink struct {
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
	Transport    string     `json:"transport,omitempty"`
	LID          uint16     `json:"lid,omitempty"`
	SMLID        uint16     `json:"sm_lid,omitempty"`
	SubnetPrefix string     `json:"subnet_prefix,omitempty"`
	Subnets      []string   `json:"subnets,omitempty"`
	Caps         *VerbsCaps `json:"caps,omitempty"`
	CarriesQPs   bool       `json:"carries_qps,omitempty"`
	// Carries names what the daemon carries of QPs on the device ("RC
	// QPs", "atomics", ...).
	Carries []string `json:"carries,omitempty"`
}

// VerbsCaps is what a verbs uplink's device can do for QPs.
type VerbsCaps struct {
	Atomic    string `json:"atomic"` // "none", "hca", "global"
	MaxSGE    int    `json:"max_sge"`
	MaxQPWR   int    `json:"max_qp_wr"`
	MaxInline int    `json:"max_inline,omitempty"` // 0: not known yet
}

// BoundPath is how instances bound to Uplink, a verbs uplink of the
// daemon's host, reach another host's instances: those bound to a verbs
// uplink there, and those not bound ("KIND: reason", or "none: why").
type BoundPath struct {
	Uplink    string `json:"uplink"`
	ToBound   string `json:"to_bound"`
	ToUnbound string `json:"to_unbound"`
}
