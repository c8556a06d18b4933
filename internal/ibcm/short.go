package ibcm

import "encoding/binary"

// The messages with little more than the two communication IDs.

// Private data sizes of the short messages.
const (
	RTUPrivateSize  = 224
	DREQPrivateSize = 220
	DREPPrivateSize = 224
	REJPrivateSize  = 148
	MRAPrivateSize  = 222
	// REJARISize is a REJ's additional rejection information.
	REJARISize = 72
)

// RTU is "ready to use" (IBTA Vol. 1 12.6.9).
type RTU struct {
	LocalCommID, RemoteCommID uint32
	PrivateData               []byte
}

// DREQ is a disconnection request (12.6.10).
type DREQ struct {
	LocalCommID, RemoteCommID uint32
	RemoteQPN                 uint32 // 24 bits: the QPN (or EECN) the sender asks to disconnect
	PrivateData               []byte
}

// DREP is a disconnection reply (12.6.11).
type DREP struct {
	LocalCommID, RemoteCommID uint32
	PrivateData               []byte
}

// Message MRAed / REJected: which message an MRA or REJ answers.
const (
	MsgREQ   = 0
	MsgREP   = 1
	MsgOther = 2 // LAP for an MRA; "no message" for a REJ
)

// REJ is a rejection (12.6.7); Reason is one of the Reject* codes.
type REJ struct {
	LocalCommID, RemoteCommID uint32
	MessageRejected           uint8 // 2 bits: MsgREQ, MsgREP, MsgOther
	ARILength                 uint8 // 7 bits
	Reason                    uint16
	ARI                       [REJARISize]byte
	PrivateData               []byte
}

// Rejection reasons (IBTA Vol. 1 table 103; Linux's ib_cm_rej_reason
// uses the same numbers).
const (
	RejectNoQP                  = 1
	RejectNoResources           = 3
	RejectTimeout               = 4 // the REP (or RTU) did not come in time
	RejectUnsupported           = 5
	RejectInvalidCommID         = 6 // a stale or unknown communication ID
	RejectInvalidServiceID      = 8
	RejectInvalidTransportType  = 9
	RejectStaleConnection       = 10
	RejectInvalidGID            = 12
	RejectInvalidMTU            = 26
	RejectInsufficientResponder = 27
	RejectConsumerDefined       = 28 // the application said no (rdma_reject)
	RejectDuplicateLocalCommID  = 30
	RejectInvalidClassVersion   = 31
)

// MRA is "message receipt acknowledgement": the answer is coming later
// (12.6.6).
type MRA struct {
	LocalCommID, RemoteCommID uint32
	MessageMRAed              uint8 // 2 bits
	ServiceTimeout            uint8 // 5 bits: 4.096 µs × 2^t
	PrivateData               []byte
}

func checkData(d []byte, what string) error {
	if len(d) != DataSize {
		return formatErr(what, "%d bytes of data, want %d", len(d), DataSize)
	}
	return nil
}

func appendData(dst []byte) ([]byte, []byte) {
	n := len(dst)
	dst = append(dst, make([]byte, DataSize)...)
	return dst, dst[n:]
}

func ids(d []byte) (uint32, uint32) {
	return binary.BigEndian.Uint32(d[0:4]), binary.BigEndian.Uint32(d[4:8])
}

func putIDs(d []byte, local, remote uint32) {
	binary.BigEndian.PutUint32(d[0:4], local)
	binary.BigEndian.PutUint32(d[4:8], remote)
}

// ParseRTU decodes an RTU's attribute data.
func ParseRTU(d []byte) (RTU, error) {
	if err := checkData(d, "RTU"); err != nil {
		return RTU{}, err
	}
	l, r := ids(d)
	return RTU{LocalCommID: l, RemoteCommID: r, PrivateData: d[8:232]}, nil
}

// Append appends m's attribute data.
func (m *RTU) Append(dst []byte) ([]byte, error) {
	dst, d := appendData(dst)
	putIDs(d, m.LocalCommID, m.RemoteCommID)
	return dst, putPrivate(d[8:232], m.PrivateData, "RTU private data")
}

// ParseDREQ decodes a DREQ's attribute data.
func ParseDREQ(d []byte) (DREQ, error) {
	if err := checkData(d, "DREQ"); err != nil {
		return DREQ{}, err
	}
	l, r := ids(d)
	return DREQ{LocalCommID: l, RemoteCommID: r, RemoteQPN: u24(d[8:11]), PrivateData: d[12:232]}, nil
}

// Append appends m's attribute data.
func (m *DREQ) Append(dst []byte) ([]byte, error) {
	dst, d := appendData(dst)
	putIDs(d, m.LocalCommID, m.RemoteCommID)
	put24(d[8:11], m.RemoteQPN)
	return dst, putPrivate(d[12:232], m.PrivateData, "DREQ private data")
}

// ParseDREP decodes a DREP's attribute data.
func ParseDREP(d []byte) (DREP, error) {
	if err := checkData(d, "DREP"); err != nil {
		return DREP{}, err
	}
	l, r := ids(d)
	return DREP{LocalCommID: l, RemoteCommID: r, PrivateData: d[8:232]}, nil
}

// Append appends m's attribute data.
func (m *DREP) Append(dst []byte) ([]byte, error) {
	dst, d := appendData(dst)
	putIDs(d, m.LocalCommID, m.RemoteCommID)
	return dst, putPrivate(d[8:232], m.PrivateData, "DREP private data")
}

// ParseREJ decodes a REJ's attribute data.
func ParseREJ(d []byte) (REJ, error) {
	if err := checkData(d, "REJ"); err != nil {
		return REJ{}, err
	}
	l, r := ids(d)
	m := REJ{LocalCommID: l, RemoteCommID: r, MessageRejected: d[8] >> 6, ARILength: d[9] >> 1,
		Reason: binary.BigEndian.Uint16(d[10:12]), PrivateData: d[84:232]}
	copy(m.ARI[:], d[12:84])
	if int(m.ARILength) > REJARISize {
		return m, formatErr("REJ ARI length", "%d, the message holds %d", m.ARILength, REJARISize)
	}
	return m, nil
}

// Append appends m's attribute data.
func (m *REJ) Append(dst []byte) ([]byte, error) {
	dst, d := appendData(dst)
	putIDs(d, m.LocalCommID, m.RemoteCommID)
	d[8] = m.MessageRejected & 3 << 6
	d[9] = m.ARILength & 0x7f << 1
	binary.BigEndian.PutUint16(d[10:12], m.Reason)
	copy(d[12:84], m.ARI[:])
	return dst, putPrivate(d[84:232], m.PrivateData, "REJ private data")
}

// ParseMRA decodes an MRA's attribute data.
func ParseMRA(d []byte) (MRA, error) {
	if err := checkData(d, "MRA"); err != nil {
		return MRA{}, err
	}
	l, r := ids(d)
	return MRA{LocalCommID: l, RemoteCommID: r, MessageMRAed: d[8] >> 6, ServiceTimeout: d[9] >> 3, PrivateData: d[10:232]}, nil
}

// Append appends m's attribute data.
func (m *MRA) Append(dst []byte) ([]byte, error) {
	dst, d := appendData(dst)
	putIDs(d, m.LocalCommID, m.RemoteCommID)
	d[8] = m.MessageMRAed & 3 << 6
	d[9] = m.ServiceTimeout & 0x1f << 3
	return dst, putPrivate(d[10:232], m.PrivateData, "MRA private data")
}
