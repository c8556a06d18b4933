package ibcm

import "encoding/binary"

// REPPrivateSize is how much private data a REP carries.
const REPPrivateSize = 196

// REP is a connection reply (IBTA Vol. 1 12.6.8).
type REP struct {
	LocalCommID, RemoteCommID uint32
	LocalQKey                 uint32
	LocalQPN                  uint32 // 24 bits
	LocalEECN                 uint32 // 24 bits
	StartingPSN               uint32 // 24 bits
	ResponderResources        uint8
	InitiatorDepth            uint8
	TargetACKDelay            uint8 // 5 bits
	FailoverAccepted          uint8 // 2 bits
	EndToEndFlowControl       bool
	RNRRetryCount             uint8 // 3 bits
	SRQ                       bool
	LocalCAGUID               uint64
	PrivateData               []byte // up to REPPrivateSize
}

// ParseREP decodes a REP's attribute data.
func ParseREP(d []byte) (REP, error) {
	if err := checkData(d, "REP"); err != nil {
		return REP{}, err
	}
	return REP{
		LocalCommID: binary.BigEndian.Uint32(d[0:4]), RemoteCommID: binary.BigEndian.Uint32(d[4:8]),
		LocalQKey: binary.BigEndian.Uint32(d[8:12]),
		LocalQPN:  u24(d[12:15]), LocalEECN: u24(d[16:19]), StartingPSN: u24(d[20:23]),
		ResponderResources: d[24], InitiatorDepth: d[25],
		TargetACKDelay: d[26] >> 3, FailoverAccepted: d[26] >> 1 & 3, EndToEndFlowControl: d[26]&1 != 0,
		RNRRetryCount: d[27] >> 5, SRQ: d[27]&0x10 != 0,
		LocalCAGUID: binary.BigEndian.Uint64(d[28:36]),
		PrivateData: d[36:232],
	}, nil
}

// Append appends r's attribute data.
func (r *REP) Append(dst []byte) ([]byte, error) {
	dst, d := appendData(dst)
	putIDs(d, r.LocalCommID, r.RemoteCommID)
	binary.BigEndian.PutUint32(d[8:12], r.LocalQKey)
	put24(d[12:15], r.LocalQPN)
	put24(d[16:19], r.LocalEECN)
	put24(d[20:23], r.StartingPSN)
	d[24], d[25] = r.ResponderResources, r.InitiatorDepth
	d[26] = r.TargetACKDelay&0x1f<<3 | r.FailoverAccepted&3<<1 | b2u(r.EndToEndFlowControl)
	d[27] = r.RNRRetryCount&7<<5 | b2u(r.SRQ)<<4
	binary.BigEndian.PutUint64(d[28:36], r.LocalCAGUID)
	return dst, putPrivate(d[36:232], r.PrivateData, "REP private data")
}
