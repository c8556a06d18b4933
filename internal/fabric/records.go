package fabric

import "time"

// The records the distributed switch keeps in etcd, one JSON document per
// key (see keys.go for where). Field names are the JSON names, so that
// `etcdctl get --prefix /vrdma/` is readable.

// Switch is the distributed switch itself: one per fabric, named by the
// prefix its records live under.
type Switch struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// PortGroup is a segment of the switch: adapters attached to it share its
// VLAN, priority, path MTU and partition.
type PortGroup struct {
	Name string `json:"name"`
	// VLAN is the 802.1Q VLAN ID, 0 (untagged) to 4094.
	VLAN uint16 `json:"vlan"`
	// PCP is the 802.1p priority (0–7) of the group's RoCE frames.
	PCP uint8 `json:"pcp"`
	// DSCP is the IP DSCP (0–63) of the group's RoCEv2 packets.
	DSCP uint8 `json:"dscp"`
	// MTU is the RoCE path MTU in bytes: 256, 512, 1024, 2048 or 4096;
	// 0 means DefaultMTU.
	MTU int `json:"mtu,omitempty"`
	// PKey is the partition key (BTH P_Key); 0 means DefaultPKey. The top
	// bit is full membership; the low 15 bits must not be zero.
	PKey uint16 `json:"pkey,omitempty"`
}

// DefaultMTU is the path MTU of a port group that names none: what
// rdma_rxe derives from an Ethernet MTU of 1500.
const DefaultMTU = 1024

// DefaultPKey is the default partition, full membership.
const DefaultPKey = 0xFFFF

// PathMTU is the group's path MTU with the default applied.
func (p PortGroup) PathMTU() int {
	if p.MTU == 0 {
		return DefaultMTU
	}
	return p.MTU
}

// PartitionKey is the group's P_Key with the default applied.
func (p PortGroup) PartitionKey() uint16 {
	if p.PKey == 0 {
		return DefaultPKey
	}
	return p.PKey
}

// Uplink kinds.
const (
	UplinkRXE = "rxe" // RoCE on a NIC (Soft-RoCE or an HCA): the rdma path
	UplinkTCP = "tcp" // the TCP channel between daemons: the fallback path
	// UplinkVerbs is a port of a device of the host's own rdma-core (an
	// HCA, rdma_rxe, siw): path selection picks it only when both hosts'
	// daemons say they carry QPs on it (CarriesQPs;
	// docs/design/verbs-uplink-paths.md).
	UplinkVerbs = "verbs"
)

// Uplink states.
const (
	UplinkUp   = "up"
	UplinkDown = "down"
)

// Uplink is one way a host reaches the network.
type Uplink struct {
	Name string `json:"name"`
	// Kind is UplinkRXE, UplinkTCP or UplinkVerbs.
	Kind string `json:"kind"`
	// RoCEVersion is 1 or 2 for an rxe uplink, 0 for tcp.
	RoCEVersion int `json:"roceVersion,omitempty"`
	// MTU is the uplink's active RoCE MTU in bytes (256..4096), 0 for tcp.
	MTU int `json:"mtu,omitempty"`
	// GIDs are the uplink's GIDs in IPv6 notation (an IPv4 address appears
	// as ::ffff:a.b.c.d). An rxe uplink has at least one.
	GIDs []string `json:"gids,omitempty"`
	// State is UplinkUp or UplinkDown ("" reads as up).
	State string `json:"state,omitempty"`

	// A verbs uplink's device: its name, link layer ("Ethernet",
	// "InfiniBand"), transport ("InfiniBand" for IB and RoCE, "iWARP"),
	// its port's LID (InfiniBand), and each GID's type ("IB", "RoCE v1",
	// "RoCE v2"), in the order of GIDs.
	Device    string   `json:"device,omitempty"`
	LinkLayer string   `json:"linkLayer,omitempty"`
	Transport string   `json:"transport,omitempty"`
	LID       uint16   `json:"lid,omitempty"`
	GIDTypes  []string `json:"gidTypes,omitempty"`
	// InfiniBand: the LID of the port's subnet manager and the subnet
	// prefix (GID 0's upper 64 bits, "fe80:0000:0000:0000" as sysfs
	// prints it): ports of one subnet share both.
	SMLID        uint16 `json:"smLid,omitempty"`
	SubnetPrefix string `json:"subnetPrefix,omitempty"`
	// Subnets are the IP prefixes of the device's netdev (RoCE, iWARP),
	// "10.47.91.0/24": RoCE v1 GIDs in one of them on two hosts are on
	// one L2 segment.
	Subnets []string `json:"subnets,omitempty"`
	// Caps is what the device can do for an instance's QPs.
	Caps *VerbsCaps `json:"caps,omitempty"`
	// CarriesQPs: this host's daemon carries instances' QPs on the device
	// (the data path). Path selection takes the device only when both
	// hosts' daemons do.
	CarriesQPs bool `json:"carriesQPs,omitempty"`
	// Carries names what the daemon carries of instances' QPs on the
	// device ("RC QPs", "atomics", ...: pathsel.DeviceFeatures); a record
	// that says CarriesQPs without it carries RC QPs.
	Carries []string `json:"carries,omitempty"`
}

// Atomic capabilities of a device (ibv_device_attr.atomic_cap).
const (
	AtomicNone   = "none"   // IBV_ATOMIC_NONE: iWARP, siw
	AtomicHCA    = "hca"    // IBV_ATOMIC_HCA: atomic within the device
	AtomicGlobal = "global" // IBV_ATOMIC_GLOB: atomic with the CPU too
)

// VerbsCaps is what a verbs uplink's device can do for an instance's QPs
// (ibv_query_device).
type VerbsCaps struct {
	Atomic  string `json:"atomic"` // AtomicNone, AtomicHCA or AtomicGlobal
	MaxSGE  int    `json:"maxSge"`
	MaxQPWR int    `json:"maxQpWr"`
	// MaxInline is the most inline data a send WR takes, which rdma-core
	// reports only per QP; 0 until the daemon has made one.
	MaxInline int `json:"maxInline,omitempty"`
}

// DefaultHostTTL is the lease TTL a daemon's host record is put under: the
// record disappears this long after the daemon stops renewing it.
const DefaultHostTTL = 5 * time.Second

// Host is a machine running one vrdma daemon. Its record is put under the
// daemon's lease, so it disappears when the daemon stops renewing it.
type Host struct {
	Name string `json:"name"`
	// Identity decides "same host" (see Identity.SameHost).
	Identity Identity `json:"identity"`
	// Addrs are the host's IP addresses.
	Addrs []string `json:"addrs,omitempty"`
	// Uplinks are the host's links onto the network.
	Uplinks []Uplink `json:"uplinks,omitempty"`
	// TCPEndpoint is the daemon's TCP channel address ("ip:port"); required
	// when the host has a tcp uplink.
	TCPEndpoint string `json:"tcpEndpoint,omitempty"`
	// CMEndpoint was the address of the connection manager's TCP
	// listener, which daemons no longer have (CM MADs on QP1 are its wire):
	// none writes it. It stays so that an older daemon's signed record,
	// which may have it, still verifies: a record is verified over its
	// re-encoding, which would drop a field this struct did not have.
	CMEndpoint string `json:"cmEndpoint,omitempty"`
	// Cert is the host's certificate of the switch's CA (PEM), and Sig the
	// record's signature by its key (over the record with Sig empty), on a
	// switch whose daemons have certificates: the other daemons take the
	// record only from the host it names, and only the addresses the
	// certificate lists (SECURITY.md).
	Cert string `json:"cert,omitempty"`
	Sig  string `json:"sig,omitempty"`
	// Lease is the lease the host put the record under, in a signed
	// record: a copy put under another lease (or none, to outlive the
	// host) does not verify.
	Lease LeaseID `json:"lease,omitempty"`
}

// MaxAdapters is the most adapters an instance may have (vrdma0..vrdma9).
const MaxAdapters = 10

// Adapter is a vrdma device of an instance.
type Adapter struct {
	// Index is the N of vrdmaN, 0..MaxAdapters-1.
	Index int `json:"index"`
	// MAC is the adapter's Ethernet address (unicast), e.g. 02:00:00:00:00:01.
	MAC string `json:"mac"`
	// GIDs are the adapter's own GIDs (IPv6 notation).
	GIDs []string `json:"gids,omitempty"`
	// PortGroup names the port group the adapter is attached to.
	PortGroup string `json:"portGroup"`
	// NativeEndpoint: the adapter's QPs appear on the wire under their own
	// identifiers, so a standard RoCEv2 peer can talk to it.
	NativeEndpoint bool `json:"nativeEndpoint,omitempty"`
	// Async: the engine polls this adapter's rings on dedicated threads.
	Async bool `json:"async,omitempty"`
	// Uplink is the verbs uplink of its host the adapter is bound to
	// (`vrdma vm create --uplink`), "" if none: its QPs are that device's.
	Uplink string `json:"uplink,omitempty"`
}

// Instance is a named tenant on a host that owns adapters.
type Instance struct {
	Name     string    `json:"name"`
	Host     string    `json:"host"`
	Adapters []Adapter `json:"adapters,omitempty"`
}
