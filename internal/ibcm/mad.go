package ibcm

import "encoding/binary"

// MADSize is the size of every CM MAD: a 24-byte common header and 232
// bytes of attribute data.
const MADSize = 256

// HeaderSize is the MAD common header's size.
const HeaderSize = 24

// DataSize is the attribute data's size.
const DataSize = MADSize - HeaderSize

// The CM class's constants (IBTA Vol. 1 13.4.2, 12.6).
const (
	BaseVersion  = 0x01
	ClassCM      = 0x07
	ClassVersion = 0x02

	MethodGet     = 0x01
	MethodSet     = 0x02
	MethodSend    = 0x03
	MethodGetResp = 0x81
)

// AttrID is a CM attribute: which message a MAD carries.
type AttrID uint16

// The CM attributes (IBTA Vol. 1 table 102).
const (
	AttrClassPortInfo AttrID = 0x0001
	AttrREQ           AttrID = 0x0010
	AttrMRA           AttrID = 0x0011
	AttrREJ           AttrID = 0x0012
	AttrREP           AttrID = 0x0013
	AttrRTU           AttrID = 0x0014
	AttrDREQ          AttrID = 0x0015
	AttrDREP          AttrID = 0x0016
	AttrSIDRREQ       AttrID = 0x0017
	AttrSIDRREP       AttrID = 0x0018
	AttrLAP           AttrID = 0x0019
	AttrAPR           AttrID = 0x001A
)

var attrNames = map[AttrID]string{
	AttrClassPortInfo: "ClassPortInfo", AttrREQ: "REQ", AttrMRA: "MRA", AttrREJ: "REJ", AttrREP: "REP",
	AttrRTU: "RTU", AttrDREQ: "DREQ", AttrDREP: "DREP", AttrSIDRREQ: "SIDR_REQ", AttrSIDRREP: "SIDR_REP",
	AttrLAP: "LAP", AttrAPR: "APR",
}

func (a AttrID) String() string {
	if s, ok := attrNames[a]; ok {
		return s
	}
	return "attribute 0x" + hex16(uint16(a))
}

func hex16(v uint16) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>12], digits[v>>8&0xf], digits[v>>4&0xf], digits[v&0xf]})
}

// Header is the MAD common header.
type Header struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8
	Status        uint16
	ClassSpecific uint16
	TID           uint64 // transaction ID
	Attr          AttrID
	AttrMod       uint32
}

// CMHeader returns the header of a CM Send MAD carrying attr.
func CMHeader(attr AttrID, tid uint64) Header {
	return Header{BaseVersion: BaseVersion, MgmtClass: ClassCM, ClassVersion: ClassVersion, Method: MethodSend, TID: tid, Attr: attr}
}

// ParseMAD splits a CM MAD into its header and its 232 bytes of attribute
// data (aliasing b). It checks the size, the base version and the class;
// the class version and method are the caller's to judge (a CM answers an
// unknown class version with a status).
func ParseMAD(b []byte) (Header, []byte, error) {
	var h Header
	if len(b) != MADSize {
		return h, nil, formatErr("MAD", "%d bytes, a CM MAD has %d", len(b), MADSize)
	}
	h = Header{
		BaseVersion: b[0], MgmtClass: b[1], ClassVersion: b[2], Method: b[3],
		Status:        binary.BigEndian.Uint16(b[4:6]),
		ClassSpecific: binary.BigEndian.Uint16(b[6:8]),
		TID:           binary.BigEndian.Uint64(b[8:16]),
		Attr:          AttrID(binary.BigEndian.Uint16(b[16:18])),
		AttrMod:       binary.BigEndian.Uint32(b[20:24]),
	}
	if h.BaseVersion != BaseVersion {
		return h, nil, formatErr("base version", "%d, want %d", h.BaseVersion, BaseVersion)
	}
	if h.MgmtClass != ClassCM {
		return h, nil, formatErr("management class", "0x%02x is not the CM's (0x%02x)", h.MgmtClass, ClassCM)
	}
	return h, b[HeaderSize:], nil
}

// AppendHeader appends h's 24 bytes.
func AppendHeader(dst []byte, h Header) []byte {
	dst = append(dst, h.BaseVersion, h.MgmtClass, h.ClassVersion, h.Method)
	dst = binary.BigEndian.AppendUint16(dst, h.Status)
	dst = binary.BigEndian.AppendUint16(dst, h.ClassSpecific)
	dst = binary.BigEndian.AppendUint64(dst, h.TID)
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Attr))
	dst = append(dst, 0, 0) // reserved
	return binary.BigEndian.AppendUint32(dst, h.AttrMod)
}

// u24 reads a 24-bit big-endian field.
func u24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

// put24 writes v's low 24 bits big-endian.
func put24(b []byte, v uint32) { b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v) }

// privateData copies n bytes of private data from src (or zeros) into dst.
func putPrivate(dst, src []byte, field string) error {
	if len(src) > len(dst) {
		return formatErr(field, "%d bytes of private data, the message holds %d", len(src), len(dst))
	}
	copy(dst, src)
	clear(dst[len(src):])
	return nil
}
