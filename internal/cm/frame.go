package cm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version this build speaks.
const Version = 1

// HeaderSize is the size of a frame header; MaxBody bounds a body, and
// MaxFrame a whole frame.
const (
	HeaderSize = 6
	MaxBody    = 512
	MaxFrame   = HeaderSize + MaxBody
)

var magic = [2]byte{'v', 'C'}

// Type says what a message is.
type Type uint8

// The message types, as IBTA names them.
const (
	TypeREQ  Type = 1 // connection request
	TypeREP  Type = 2 // reply to a request
	TypeRTU  Type = 3 // ready to use: the requester confirms a reply
	TypeREJ  Type = 4 // reject
	TypeDREQ Type = 5 // disconnection request
	TypeDREP Type = 6 // reply to a disconnection request
	typeMax  Type = 7
)

var typeNames = [...]string{"", "REQ", "REP", "RTU", "REJ", "DREQ", "DREP"}

func (t Type) String() string {
	if t > 0 && t < typeMax {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Decoding errors. A *ProtocolError wraps one of them with the details.
var (
	ErrTruncated   = errors.New("cm: truncated frame")
	ErrMagic       = errors.New("cm: bad magic: the peer is not a vrdma connection manager")
	ErrVersion     = errors.New("cm: protocol version mismatch")
	ErrType        = errors.New("cm: unknown message type")
	ErrTooLong     = errors.New("cm: frame longer than the largest message")
	ErrMalformed   = errors.New("cm: malformed message")
	ErrPrivateData = errors.New("cm: private data too large")
)

// ProtocolError is a frame that was refused: its type (if the header got
// that far), the class of problem (one of the Err variables) and what
// exactly was wrong.
type ProtocolError struct {
	Type   Type
	Err    error
	Detail string
}

func (e *ProtocolError) Error() string {
	s := e.Err.Error()
	if e.Type != 0 {
		s += " (" + e.Type.String() + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *ProtocolError) Unwrap() error { return e.Err }

func protoErr(t Type, err error, format string, args ...any) *ProtocolError {
	return &ProtocolError{Type: t, Err: err, Detail: fmt.Sprintf(format, args...)}
}

// parseHeader checks a frame header and returns the type and body length.
func parseHeader(h []byte) (Type, int, error) {
	if len(h) < HeaderSize {
		return 0, 0, protoErr(0, ErrTruncated, "%d of the header's %d bytes", len(h), HeaderSize)
	}
	if h[0] != magic[0] || h[1] != magic[1] {
		return 0, 0, protoErr(0, ErrMagic, "first bytes %q", h[:2])
	}
	if h[2] != Version {
		return 0, 0, protoErr(0, ErrVersion, "the peer speaks version %d, this daemon %d: run daemons of the same release", h[2], Version)
	}
	t := Type(h[3])
	if t == 0 || t >= typeMax {
		return 0, 0, protoErr(0, ErrType, "type %d", h[3])
	}
	n := int(binary.BigEndian.Uint16(h[4:]))
	if n > MaxBody {
		return t, 0, protoErr(t, ErrTooLong, "body length %d is above %d", n, MaxBody)
	}
	return t, n, nil
}

// Parse decodes the frame at the start of b and returns the message and the
// number of bytes it took. A b that holds only part of a frame gives
// ErrTruncated.
func Parse(b []byte) (Message, int, error) {
	t, n, err := parseHeader(b)
	if err != nil {
		return nil, 0, err
	}
	if len(b) < HeaderSize+n {
		return nil, 0, protoErr(t, ErrTruncated, "%d of the body's %d bytes", len(b)-HeaderSize, n)
	}
	m, err := parseBody(t, b[HeaderSize:HeaderSize+n])
	if err != nil {
		return nil, 0, err
	}
	return m, HeaderSize + n, nil
}

// ReadFrame reads one frame from r into buf and decodes it. The header is
// checked before the body is read. A stream that ends between frames gives
// io.EOF; one that ends inside a frame gives ErrTruncated.
func ReadFrame(r io.Reader, buf *[MaxFrame]byte) (Message, error) {
	if n, err := io.ReadFull(r, buf[:HeaderSize]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, readErr(0, n, HeaderSize, err)
	}
	t, n, err := parseHeader(buf[:HeaderSize])
	if err != nil {
		return nil, err
	}
	if k, err := io.ReadFull(r, buf[HeaderSize:HeaderSize+n]); err != nil {
		return nil, readErr(t, k, n, err)
	}
	return parseBody(t, buf[HeaderSize:HeaderSize+n])
}

func readErr(t Type, got, want int, err error) error {
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return protoErr(t, ErrTruncated, "the stream ended after %d of %d bytes", got, want)
	}
	return err
}

// appendFrame appends the header of a body of type t that the caller then
// appends, and returns the offset of the length field to patch.
func appendHeader(b []byte, t Type) ([]byte, int) {
	b = append(b, magic[0], magic[1], Version, byte(t), 0, 0)
	return b, len(b) - 2
}

// finish patches the body length written after the header at lenOff.
func finish(b []byte, t Type, lenOff int) ([]byte, error) {
	n := len(b) - lenOff - 2
	if n > MaxBody {
		return nil, protoErr(t, ErrTooLong, "body of %d bytes is above %d", n, MaxBody)
	}
	binary.BigEndian.PutUint16(b[lenOff:], uint16(n))
	return b, nil
}
