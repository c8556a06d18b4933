package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the protocol version this build speaks.
const Version = 1

// HeaderSize is the size of a message header; MaxMessage bounds a whole
// message (one datagram); MaxBody the body one message carries; MaxReply
// the body of a whole reply, whose parts are messages of at most
// MaxMessage (docs/design/command-replies.md); MaxFDs bounds the
// descriptors one message carries; Magic opens every message.
const (
	HeaderSize = 16
	MaxMessage = 64 << 10
	MaxBody    = MaxMessage - HeaderSize
	MaxReply   = 16 << 20
	MaxFDs     = 16
	Magic      = 0x7652 // "vR", little-endian, the first two bytes of every message
)

// Kind says what a message is.
type Kind uint8

const (
	KindRequest Kind = 1
	KindReply   Kind = 2
	KindEvent   Kind = 3
)

// KindMore is the bit of the kind byte that marks a part of a reply with
// more parts to follow: a reply larger than MaxBody goes as parts of the
// same op, code and id, every one but the last with KindMore set.
const KindMore = 0x80

// Header is the fixed part of every message.
type Header struct {
	Version uint8
	Kind    Kind
	More    bool // a part of a reply, with more to follow (KindMore)
	Op      Op
	Code    Code
	ID      uint32
	BodyLen uint32
}

// Decoding errors.
var (
	ErrShort      = errors.New("proto: message shorter than its header")
	ErrMagic      = errors.New("proto: bad magic: the peer is not a vrdma endpoint")
	ErrLength     = errors.New("proto: body length does not match the message")
	ErrKind       = errors.New("proto: unknown message kind")
	ErrTooLarge   = errors.New("proto: message larger than 64 KiB")
	ErrParts      = errors.New("proto: a reply's parts do not follow each other")
	ErrVersionGap = errors.New("proto: protocol version mismatch")
)

// AppendHeader appends h to b.
func AppendHeader(b []byte, h Header) []byte {
	b = binary.LittleEndian.AppendUint16(b, Magic)
	kind := byte(h.Kind)
	if h.More {
		kind |= KindMore
	}
	b = append(b, h.Version, kind)
	b = binary.LittleEndian.AppendUint16(b, uint16(h.Op))
	b = binary.LittleEndian.AppendUint16(b, uint16(h.Code))
	b = binary.LittleEndian.AppendUint32(b, h.ID)
	b = binary.LittleEndian.AppendUint32(b, h.BodyLen)
	return b
}

// ParseHeader decodes the header of msg and returns the body.
func ParseHeader(msg []byte) (Header, []byte, error) {
	var h Header
	if len(msg) < HeaderSize {
		return h, nil, ErrShort
	}
	if len(msg) > MaxMessage {
		return h, nil, ErrTooLarge
	}
	le := binary.LittleEndian
	if le.Uint16(msg) != Magic {
		return h, nil, ErrMagic
	}
	h.Version = msg[2]
	h.Kind = Kind(msg[3] &^ KindMore)
	h.More = msg[3]&KindMore != 0
	h.Op = Op(le.Uint16(msg[4:]))
	h.Code = Code(le.Uint16(msg[6:]))
	h.ID = le.Uint32(msg[8:])
	h.BodyLen = le.Uint32(msg[12:])
	if h.Kind < KindRequest || h.Kind > KindEvent || h.More && h.Kind != KindReply {
		return h, nil, ErrKind
	}
	if h.Version != Version {
		return h, nil, fmt.Errorf("%w: peer speaks version %d, this build speaks %d: run a vrdma library and daemon of the same release", ErrVersionGap, h.Version, Version)
	}
	if int(h.BodyLen) != len(msg)-HeaderSize {
		return h, nil, ErrLength
	}
	return h, msg[HeaderSize:], nil
}
