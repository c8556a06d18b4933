package cm

// QP types a request may ask to connect (ibverbs' values: UD needs no
// connection). A request's type is the requester's QP's: an XRC initiator
// (XRC_SEND) asks for an XRC target (XRC_RECV), which is what answers it
// (ResponderQPType).
const (
	QPTypeRC      = 2
	QPTypeUC      = 3
	QPTypeXRCSend = 9
	QPTypeXRCRecv = 10
)

// ResponderQPType is the type of QP that answers a request from a QP of
// type t: the same type, but an XRC target for an XRC initiator.
func ResponderQPType(t uint8) uint8 {
	if t == QPTypeXRCSend {
		return QPTypeXRCRecv
	}
	return t
}

// REQ asks the host of DstGID to connect a QP of whoever listens on
// DstPort to the requester's QP.
type REQ struct {
	LocalID            uint32
	SrcPort, DstPort   uint16
	QPType             uint8
	MTU                uint8 // the requester's active MTU (ibv_mtu: 1 = 256 ... 5 = 4096)
	ResponderResources uint8 // RDMA READs and atomics the requester serves at once (0 from an XRC initiator, which serves none)
	InitiatorDepth     uint8 // RDMA READs and atomics the requester issues at once
	QPN                uint32
	PSN                uint32
	TimeoutMillis      uint32 // how long the requester waits for the reply (0: the responder's default)
	SrcGID, DstGID     [16]byte
	PrivateData        []byte
}

func (m *REQ) Type() Type                  { return TypeREQ }
func (m *REQ) IDs() (local, remote uint32) { return m.LocalID, 0 }
