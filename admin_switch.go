package vrdma

import "github.com/vrdma/vrdma/internal/proto"

// The distributed switch, as a daemon on it sees it. The types carry JSON
// tags: `vrdma switch show --json` and its kin print them.

// SwitchInfo describes the switch: its etcd, its subnet manager, counts.
type SwitchInfo struct {
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

// PortGroup is a segment of the switch: VLAN, priority, path MTU and
// partition of the adapters attached to it.
type PortGroup struct {
	Name string `json:"name"`
	VLAN uint16 `json:"vlan"`
	PCP  uint8  `json:"pcp"`
	DSCP uint8  `json:"dscp"`
	MTU  int    `json:"mtu,omitempty"`  // bytes: 256 to 4096 (0: the switch's default)
	PKey uint16 `json:"pkey,omitempty"` // 0: the default partition
	// Adapters counts the adapters attached (PortGroups only).
	Adapters int `json:"adapters,omitempty"`
}

// UplinkInfo is one uplink of a host.
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

// HostInfo is a live host of the switch, with the path from this one.
type HostInfo struct {
	Name        string       `json:"name"`
	Identity    string       `json:"identity"`
	Addrs       []string     `json:"addrs,omitempty"`
	Uplinks     []UplinkInfo `json:"uplinks,omitempty"`
	TCPEndpoint string       `json:"tcp_endpoint,omitempty"`
	SM          bool         `json:"sm,omitempty"`   // holds the subnet manager
	Self        bool         `json:"self,omitempty"` // the daemon's own host
	// Path is how this daemon's adapters reach the host's, and why.
	Path string `json:"path,omitempty"`
	// Bound is, for each verbs uplink of this daemon's host, how instances
	// bound to it reach the host's instances (none for this host itself).
	Bound []BoundPath `json:"bound,omitempty"`
}

// PathInfo is the path between two adapters, and why.
type PathInfo struct {
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
// HostB), how they reach each other ("RoCE v2", "iWARP", ...) and why the
// path does not take them ("" when it does).
type PathDevices struct {
	A       string `json:"a"`
	B       string `json:"b"`
	DeviceA string `json:"device_a"`
	DeviceB string `json:"device_b"`
	Mode    string `json:"mode"`
	Blocked string `json:"blocked,omitempty"`
}

// PathRequest is what an instance's QPs ask of a path: UD QPs, atomics,
// inline data and SGEs per WR, and the path MTU (0: the adapters' port
// group's). A verbs uplink whose device lacks one is not taken, and the
// reason says so.
type PathRequest struct {
	UD        bool `json:"ud,omitempty"`
	SRQ       bool `json:"srq,omitempty"`
	Atomics   bool `json:"atomics,omitempty"`
	MaxInline int  `json:"max_inline,omitempty"`
	MaxSGE    int  `json:"max_sge,omitempty"`
	MTU       int  `json:"mtu,omitempty"`
}

// Switch describes the switch the daemon is on (an error if none).
func (a *Admin) Switch() (SwitchInfo, error) {
	var s proto.SwitchInfo
	if _, err := a.c.call(proto.OpSwitchShow, nil, &s); err != nil {
		return SwitchInfo{}, err
	}
	return SwitchInfo{Name: s.Name, Endpoints: s.Endpoints, Embedded: s.Embedded, Host: s.Host,
		SMHost: s.SMHost, SMPriority: s.SMPriority, Role: s.Role, Hosts: s.Hosts, PortGroups: s.PortGroups,
		Instances: s.Instances, Fallbacks: s.Fallbacks, HostsGone: s.HostsGone, SMReport: s.SMReport,
		LeaseLost: s.LeaseLost, SMCandidates: s.SMCandidates, SMElection: s.SMElection,
		Security: s.Security, Channel: ListenerStats(s.Channel), Outsiders: OutsiderStats(s.Outsiders)}, nil
}

// Hosts lists the switch's live hosts.
func (a *Admin) Hosts() ([]HostInfo, error) {
	var r proto.HostListResp
	if _, err := a.c.call(proto.OpHostList, nil, &r); err != nil {
		return nil, err
	}
	out := make([]HostInfo, 0, len(r.Hosts))
	for _, h := range r.Hosts {
		hi := HostInfo{Name: h.Name, Identity: h.Identity, Addrs: h.Addrs, TCPEndpoint: h.TCPEndpoint,
			SM: h.SM, Self: h.Self, Path: h.Path}
		for _, b := range h.Bound {
			hi.Bound = append(hi.Bound, BoundPath(b))
		}
		for _, u := range h.Uplinks {
			hi.Uplinks = append(hi.Uplinks, UplinkInfo{Name: u.Name, Kind: u.Kind, State: u.State, MTU: u.MTU, GIDs: u.GIDs,
				Device: u.Device, LinkLayer: u.LinkLayer, GIDTypes: u.GIDTypes, Transport: u.Transport, LID: u.LID, SMLID: u.SMLID,
				SubnetPrefix: u.SubnetPrefix, Subnets: u.Subnets, Caps: (*VerbsCapsInfo)(u.Caps), CarriesQPs: u.CarriesQPs, Carries: u.Carries})
		}
		out = append(out, hi)
	}
	return out, nil
}

// PortGroups lists the switch's port groups.
func (a *Admin) PortGroups() ([]PortGroup, error) {
	var r proto.PortGroupListResp
	if _, err := a.c.call(proto.OpPortGroupList, nil, &r); err != nil {
		return nil, err
	}
	out := make([]PortGroup, 0, len(r.PortGroups))
	for _, p := range r.PortGroups {
		out = append(out, PortGroup{Name: p.Name, VLAN: p.VLAN, PCP: p.PCP, DSCP: p.DSCP, MTU: p.MTU, PKey: p.PKey, Adapters: p.Adapters})
	}
	return out, nil
}

// AddPortGroup creates or replaces a port group (root and the admin group).
func (a *Admin) AddPortGroup(p PortGroup) error {
	_, err := a.c.call(proto.OpPortGroupAdd, proto.PortGroupSpec{Name: p.Name, VLAN: p.VLAN, PCP: p.PCP, DSCP: p.DSCP, MTU: p.MTU, PKey: p.PKey}, nil)
	return err
}

// DeletePortGroup deletes a port group no adapter is attached to (root and
// the admin group).
func (a *Admin) DeletePortGroup(name string) error {
	_, err := a.c.call(proto.OpPortGroupDelete, proto.PortGroupSpec{Name: name}, nil)
	return err
}

// Path returns the path between two adapters named INSTANCE/vrdmaN.
func (a *Admin) Path(adapterA, adapterB string) (PathInfo, error) {
	return a.path(proto.PathReq{A: adapterA, B: adapterB})
}

// PathFor returns the path between two adapters for QPs that ask req.
func (a *Admin) PathFor(adapterA, adapterB string, req PathRequest) (PathInfo, error) {
	pr := proto.PathRequest(req)
	return a.path(proto.PathReq{A: adapterA, B: adapterB, Request: &pr})
}

func (a *Admin) path(req proto.PathReq) (PathInfo, error) {
	var r proto.PathResp
	if _, err := a.c.call(proto.OpPath, req, &r); err != nil {
		return PathInfo{}, err
	}
	return PathInfo{Kind: r.Kind, Reason: r.Reason, HostA: r.HostA, HostB: r.HostB, UplinkA: r.UplinkA, UplinkB: r.UplinkB, Devices: (*PathDevices)(r.Devices)}, nil
}
