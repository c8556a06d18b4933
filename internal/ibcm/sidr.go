package ibcm

import "encoding/binary"

// Service ID resolution: a UD client asks a service's QPN and Q_Key
// (rdma_cm's RDMA_PS_UDP connections, udaddy). IBTA Vol. 1 12.11.

// Private data sizes of the SIDR messages, and SIDR_REP's class port info.
const (
	SIDRREQPrivateSize = 216
	SIDRREPPrivateSize = 136
	ClassPortInfoSize  = 72
)

// SIDR_REP statuses (IBTA table 112).
const (
	SIDRValid           = 0 // QPN and Q_Key are valid
	SIDRNoService       = 1 // the service ID is not supported
	SIDRRejected        = 2 // the service provider said no
	SIDRNoResources     = 3
	SIDRRedirect        = 4 // ClassPortInfo says where to ask
	SIDRUnsupportedVers = 5 // the class version is not supported
)

// SIDRREQ asks for a service's QP.
type SIDRREQ struct {
	RequestID   uint32
	PKey        uint16
	ServiceID   uint64
	PrivateData []byte // up to SIDRREQPrivateSize; rdma_cm's IP CM header first
}

// SIDRREP answers a SIDRREQ.
type SIDRREP struct {
	RequestID     uint32
	Status        uint8
	AddInfoLength uint8
	QPN           uint32 // 24 bits
	ServiceID     uint64
	QKey          uint32
	ClassPortInfo [ClassPortInfoSize]byte
	PrivateData   []byte // up to SIDRREPPrivateSize
}

// ParseSIDRREQ decodes a SIDR_REQ's attribute data.
func ParseSIDRREQ(d []byte) (SIDRREQ, error) {
	if err := checkData(d, "SIDR_REQ"); err != nil {
		return SIDRREQ{}, err
	}
	return SIDRREQ{RequestID: binary.BigEndian.Uint32(d[0:4]), PKey: binary.BigEndian.Uint16(d[4:6]),
		ServiceID: binary.BigEndian.Uint64(d[8:16]), PrivateData: d[16:232]}, nil
}

// Append appends m's attribute data.
func (m *SIDRREQ) Append(dst []byte) ([]byte, error) {
	dst, d := appendData(dst)
	binary.BigEndian.PutUint32(d[0:4], m.RequestID)
	binary.BigEndian.PutUint16(d[4:6], m.PKey)
	binary.BigEndian.PutUint64(d[8:16], m.ServiceID)
	return dst, putPrivate(d[16:232], m.PrivateData, "SIDR_REQ private data")
}

// ParseSIDRREP decodes a SIDR_REP's attribute data.
func ParseSIDRREP(d []byte) (SIDRREP, error) {
	if err := checkData(d, "SIDR_REP"); err != nil {
		return SIDRREP{}, err
	}
	m := SIDRREP{RequestID: binary.BigEndian.Uint32(d[0:4]), Status: d[4], AddInfoLength: d[5],
		QPN: u24(d[8:11]), ServiceID: binary.BigEndian.Uint64(d[12:20]), QKey: binary.BigEndian.Uint32(d[20:24]),
		PrivateData: d[96:232]}
	copy(m.ClassPortInfo[:], d[24:96])
	return m, nil
}

// Append appends m's attribute data.
func (m *SIDRREP) Append(dst []byte) ([]byte, error) {
	dst, d := appendData(dst)
	binary.BigEndian.PutUint32(d[0:4], m.RequestID)
	d[4], d[5] = m.Status, m.AddInfoLength
	put24(d[8:11], m.QPN)
	binary.BigEndian.PutUint64(d[12:20], m.ServiceID)
	binary.BigEndian.PutUint32(d[20:24], m.QKey)
	copy(d[24:96], m.ClassPortInfo[:])
	return dst, putPrivate(d[96:232], m.PrivateData, "SIDR_REP private data")
}
