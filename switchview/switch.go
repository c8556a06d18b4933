package switchview

// Switch describes the switch: its etcd, its subnet manager, counts
// (`vrdma switch show`).
type Switch struct {
	Name       string   `json:"name"`
	Endpoints  []string `json:"endpoints"`
	Embedded   bool     `json:"embedded"` // the etcd runs inside this daemon
	Host       string   `json:"host"`     // this daemon's host
	SMHost     string   `json:"sm_host"`  // the subnet manager's holder ("" while none)
	SMPriority int      `json:"sm_prio"`  // its priority
	Role       string   `json:"role"`     // this daemon's: "master", "standby", ...
	Hosts      int      `json:"hosts"`    // live hosts
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
	// Security says how the switch's daemons authenticate each other:
	// "mutual TLS", or "insecure" when an operator allowed plaintext
	// beyond loopback. Channel is what the TCP channel's listener let in
	// and refused.
	Security string        `json:"security"`
	Channel  ListenerStats `json:"channel"`
	// Outsiders are what came over RoCEv2 from outside a switch with
	// certificates (an address no member host publishes) and was dropped.
	Outsiders OutsiderStats `json:"outsiders"`
}

// OutsiderStats count what a daemon on a switch with certificates dropped
// from outside the switch: CM requests for a listener, and packets for a
// QP, whose instance is not a native endpoint (`vrdma vm create
// --native-endpoints` takes them).
type OutsiderStats struct {
	Requests uint64 `json:"requests"`
	Packets  uint64 `json:"packets"`
}

// ListenerStats are what one of a daemon's listeners between daemons let
// in and refused.
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
