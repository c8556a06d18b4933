package ibcm

import "encoding/binary"

// REQPrivateSize is how much private data a REQ carries.
const REQPrivateSize = 92

// REQ is a connection request (IBTA Vol. 1 12.6.5).
type REQ struct {
	LocalCommID             uint32
	ServiceID               uint64
	LocalCAGUID             uint64
	LocalQKey               uint32
	LocalQPN                uint32 // 24 bits
	ResponderResources      uint8
	LocalEECN               uint32 // 24 bits
	InitiatorDepth          uint8
	RemoteEECN              uint32 // 24 bits
	RemoteCMResponseTimeout uint8  // 5 bits: 4.096 µs × 2^t
	TransportType           uint8  // 2 bits: 0 RC, 1 UC, 3 see ExtTransportType
	EndToEndFlowControl     bool
	StartingPSN             uint32 // 24 bits
	LocalCMResponseTimeout  uint8  // 5 bits
	RetryCount              uint8  // 3 bits
	PKey                    uint16
	PathMTU                 uint8 // 4 bits: the IB MTU code (3 = 1024)
	RDCExists               bool
	RNRRetryCount           uint8 // 3 bits
	MaxCMRetries            uint8 // 4 bits
	SRQ                     bool
	ExtTransportType        uint8 // 3 bits: 1 XRC
	Primary, Alternate      Path
	PrivateData             []byte // up to REQPrivateSize; aliases the MAD when parsed
}

// ParseREQ decodes a REQ's 232 bytes of attribute data.
func ParseREQ(d []byte) (REQ, error) {
	if err := checkData(d, "REQ"); err != nil {
		return REQ{}, err
	}
	r := REQ{
		LocalCommID: binary.BigEndian.Uint32(d[0:4]),
		ServiceID:   binary.BigEndian.Uint64(d[8:16]),
		LocalCAGUID: binary.BigEndian.Uint64(d[16:24]),
		LocalQKey:   binary.BigEndian.Uint32(d[28:32]),
		LocalQPN:    u24(d[32:35]), ResponderResources: d[35],
		LocalEECN: u24(d[36:39]), InitiatorDepth: d[39],
		RemoteEECN: u24(d[40:43]), RemoteCMResponseTimeout: d[43] >> 3, TransportType: d[43] >> 1 & 3, EndToEndFlowControl: d[43]&1 != 0,
		StartingPSN: u24(d[44:47]), LocalCMResponseTimeout: d[47] >> 3, RetryCount: d[47] & 7,
		PKey:    binary.BigEndian.Uint16(d[48:50]),
		PathMTU: d[50] >> 4, RDCExists: d[50]&0x08 != 0, RNRRetryCount: d[50] & 7,
		MaxCMRetries: d[51] >> 4, SRQ: d[51]&0x08 != 0, ExtTransportType: d[51] & 7,
		Primary:     parsePath(d[52:96]),
		Alternate:   parsePath(d[96:140]),
		PrivateData: d[140:232],
	}
	return r, nil
}

// Append appends r's 232 bytes of attribute data (a MAD's after its
// header); its private data is zero-padded.
func (r *REQ) Append(dst []byte) ([]byte, error) {
	dst, d := appendData(dst)
	binary.BigEndian.PutUint32(d[0:4], r.LocalCommID)
	binary.BigEndian.PutUint64(d[8:16], r.ServiceID)
	binary.BigEndian.PutUint64(d[16:24], r.LocalCAGUID)
	binary.BigEndian.PutUint32(d[28:32], r.LocalQKey)
	put24(d[32:35], r.LocalQPN)
	d[35] = r.ResponderResources
	put24(d[36:39], r.LocalEECN)
	d[39] = r.InitiatorDepth
	put24(d[40:43], r.RemoteEECN)
	d[43] = r.RemoteCMResponseTimeout&0x1f<<3 | r.TransportType&3<<1 | b2u(r.EndToEndFlowControl)
	put24(d[44:47], r.StartingPSN)
	d[47] = r.LocalCMResponseTimeout&0x1f<<3 | r.RetryCount&7
	binary.BigEndian.PutUint16(d[48:50], r.PKey)
	d[50] = r.PathMTU&0xf<<4 | b2u(r.RDCExists)<<3 | r.RNRRetryCount&7
	d[51] = r.MaxCMRetries&0xf<<4 | b2u(r.SRQ)<<3 | r.ExtTransportType&7
	r.Primary.put(d[52:96])
	r.Alternate.put(d[96:140])
	return dst, putPrivate(d[140:232], r.PrivateData, "REQ private data")
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
