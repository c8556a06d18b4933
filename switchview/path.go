package switchview

// Path is the path between two adapters, and why (`vrdma path`).
type Path struct {
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

// PathDevices is a pair of matching verbs uplinks (A on HostA, B on
// HostB), how they reach each other ("RoCE v2", "InfiniBand (...)",
// "iWARP", ...) and why the path does not take them ("" when it does).
type PathDevices struct {
	A       string `json:"a"`
	B       string `json:"b"`
	DeviceA string `json:"device_a"`
	DeviceB string `json:"device_b"`
	Mode    string `json:"mode"`
	Blocked string `json:"blocked,omitempty"`
}

// PathRequest is what an instance's QPs ask of a path: UD QPs, SRQs,
// atomics, inline data and SGEs per WR, and the path MTU (0: the adapters'
// port group's). A verbs uplink whose device lacks one is not taken, and
// the reason says so.
type PathRequest struct {
	UD        bool `json:"ud,omitempty"`
	SRQ       bool `json:"srq,omitempty"`
	Atomics   bool `json:"atomics,omitempty"`
	MaxInline int  `json:"max_inline,omitempty"`
	MaxSGE    int  `json:"max_sge,omitempty"`
	MTU       int  `json:"mtu,omitempty"`
}
