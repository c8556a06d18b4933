package cm

// QP types a request may ask to connect (ibverbs' values: UD needs no
// connection).
const (
	QPTypeRC = 2
	QPTypeUC = 3
)

// REQ asks the host of DstGID to connect a QP of whoever listens on
// DstPort to the requester's QP.
type REQ struct {
	LocalID            uint32
	SrcPort, DstPort   uint16
	QPType             uint8
	MTU                uint8 // the requester's active MTU (ibv_mtu: 1 = 256 ... 5 = 4096)
	ResponderResources uint8 // RDMA READs and atomics the requester serves at once
	InitiatorDepth     uint8 // RDMA READs and atomics the requester issues at once
	QPN                uint32
	PSN                uint32
	TimeoutMillis      uint32 // how long the requester waits for the reply (0: the responder's default)
	SrcGID, DstGID     [16]byte
	PrivateData        []byte
}

func (m *REQ) Type() Type                  { return TypeREQ }
func (m *REQ) IDs() (local, remote uint32) { return m.LocalID, 0 }
