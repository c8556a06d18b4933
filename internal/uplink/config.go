package uplink

// DefaultPort is the RoCEv2 UDP port (IANA), where rxe listens.
const DefaultPort = 4791

// Config says which interface a link uses and how.
type Config struct {
	Name   string // the link's name, as `vrdma link add NAME` gave it
	Netdev string // the host interface, e.g. "eth0"
	// DSCP (0..63) is the differentiated-services code point the engine
	// writes into the frames it builds (TOS or traffic class DSCP<<2). The
	// link sends frames as they are; it only keeps the value.
	DSCP uint8
	// Port is the UDP port the link listens on: 0 means 4791, the RoCEv2
	// port. Tests may use another.
	Port uint16
	// WaitNetdev makes a missing interface no error: the link starts DOWN,
	// with no GIDs, and comes up when the interface appears. A daemon
	// restoring its saved links uses it.
	WaitNetdev bool
	// GSO sends each run of a message's MTU-sized packets to one QP as one
	// UDP GSO buffer (docs/design/bulk-path.md) and lets the port-holding
	// sockets take such buffers whole (UDP_GRO) rather than cut up. A link
	// receives GSO buffers whole or cut up either way.
	GSO bool
}

func (c Config) port() uint16 {
	if c.Port == 0 {
		return DefaultPort
	}
	return c.Port
}

// Stats are a link's traffic counters since Open.
type Stats struct {
	RxPackets, RxBytes uint64 // delivered
	TxPackets, TxBytes uint64 // handed to the kernel
	// RxNotOurs counts packets to the port for an address that is not the
	// link's (the raw sockets see every UDP packet of the network
	// namespace); RxDropped, packets too large for a buffer or malformed.
	RxNotOurs, RxDropped uint64
	RxErrors, TxErrors   uint64 // failed receive calls; frames the kernel refused
	// TxGSO counts GSO sends, RxGSO GSO buffers that arrived whole and
	// were cut into their packets; the packets are in TxPackets and
	// RxPackets.
	TxGSO, RxGSO uint64
}

// State is what a link knows about its interface.
type State struct {
	// Active: the interface exists, is up and has a carrier. rdma-core
	// shows it as "state ACTIVE physical_state LINK_UP", otherwise as
	// "state DOWN physical_state DISABLED".
	Active bool
	// Netdev: the interface exists.
	Netdev bool
	// Problem says why the link is not active, or what went wrong while
	// following the interface's addresses (the port taken on a new
	// address); "" when all is well.
	Problem string
}

// Port returns the port state as rdma-core prints it.
func (s State) Port() string {
	if s.Active {
		return "ACTIVE"
	}
	return "DOWN"
}

// Phys returns the physical state as rdma-core prints it.
func (s State) Phys() string {
	if s.Active {
		return "LINK_UP"
	}
	return "DISABLED"
}
