package cm

// QP types a request may ask to connect (ibverbs' values: UD needs no
// connection).
const (
	QPTypeRC = 2
	QPTypeUC = 3
)

// REQ asks the host of DstGID to connect a QP of whoever listens on
// DstPort to the requester's QP.
//
//	 0 local id u32    4 remote id u32 (0)
//	 8 source port u16   10 destination port u16
//	12 QP type u8   13 MTU u8   14 responder resources u8   15 initiator depth u8
//	16 QPN u32 (24 bits)   20 starting PSN u32 (24 bits)
//	24 timeout u32: milliseconds the requester waits for the reply (0: the responder's default)
//	28 source GID [16]   44 destination GID [16]
//	60 private data length u8 (≤ 56)   61 private data
type REQ struct {
	LocalID            uint32
	SrcPort, DstPort   uint16
	QPType             uint8
	MTU                uint8 // the requester's active MTU (ibv_mtu: 1 = 256 ... 5 = 4096)
	ResponderResources uint8 // RDMA READs and atomics the requester serves at once
	InitiatorDepth     uint8 // RDMA READs and atomics the requester issues at once
	QPN                uint32
	PSN                uint32
	TimeoutMillis      uint32
	SrcGID, DstGID     [16]byte
	PrivateData        []byte
}

func (m *REQ) Type() Type                  { return TypeREQ }
func (m *REQ) IDs() (local, remote uint32) { return m.LocalID, 0 }

// Append appends m as a frame.
func (m *REQ) Append(b []byte) ([]byte, error) {
	w := newWriter(b, TypeREQ)
	w.ids(m.LocalID, 0)
	w.u16(m.SrcPort)
	w.u16(m.DstPort)
	if err := checkQP(TypeREQ, m.QPType, m.MTU); err != nil && w.err == nil {
		w.err = err
	}
	w.u8(m.QPType)
	w.u8(m.MTU)
	w.u8(m.ResponderResources)
	w.u8(m.InitiatorDepth)
	w.u24(m.QPN, "QPN")
	w.u24(m.PSN, "PSN")
	w.u32(m.TimeoutMillis)
	w.gid(m.SrcGID)
	w.gid(m.DstGID)
	w.privateData(m.PrivateData)
	return w.finish(b)
}

func parseREQ(b []byte) (*REQ, error) {
	r := &reader{t: TypeREQ, b: b}
	m := &REQ{}
	var remote uint32
	m.LocalID, remote = r.ids()
	m.SrcPort = r.u16("the source port")
	m.DstPort = r.u16("the destination port")
	m.QPType = r.u8("the QP type")
	m.MTU = r.u8("the MTU")
	m.ResponderResources = r.u8("the responder resources")
	m.InitiatorDepth = r.u8("the initiator depth")
	m.QPN = r.u24("QPN")
	m.PSN = r.u24("PSN")
	m.TimeoutMillis = r.u32("the timeout")
	m.SrcGID = r.gid("the source GID")
	m.DstGID = r.gid("the destination GID")
	m.PrivateData = r.privateData()
	r.checkIDs(m.LocalID, remote)
	if err := r.done(); err != nil {
		return nil, err
	}
	if err := checkQP(TypeREQ, m.QPType, m.MTU); err != nil {
		return nil, err
	}
	return m, nil
}

// checkQP checks a QP type and an MTU.
func checkQP(t Type, qpType, mtu uint8) error {
	if qpType != QPTypeRC && qpType != QPTypeUC {
		return badField(t, "QP type %d: only RC (2) and UC (3) connect", qpType)
	}
	return checkMTU(t, mtu)
}

func checkMTU(t Type, mtu uint8) error {
	if mtu < 1 || mtu > 5 {
		return badField(t, "MTU %d: one of 1 (256 bytes) to 5 (4096)", mtu)
	}
	return nil
}
