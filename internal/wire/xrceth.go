package wire

import (
	"encoding/binary"
	"errors"
)

// ErrXRCETHShort is ParseXRCETH's answer to fewer than 4 bytes.
var ErrXRCETHShort = errors.New("wire: XRCETH needs 4 bytes")

// ParseXRCETH reads the XRCETH at the start of b: a reserved byte, which
// it ignores as receivers must, and the 24-bit XRC SRQ number.
func ParseXRCETH(b []byte) (XRCETH, error) {
	if len(b) < xrcethLen {
		return XRCETH{}, ErrXRCETHShort
	}
	return XRCETH{SRQN: binary.BigEndian.Uint32(b) & 0xffffff}, nil
}

// Append appends x's 4 bytes to dst: a zero reserved byte and the low 24
// bits of SRQN, in network order.
func (x XRCETH) Append(dst []byte) []byte {
	return binary.BigEndian.AppendUint32(dst, x.SRQN&0xffffff)
}
