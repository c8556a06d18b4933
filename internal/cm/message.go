package cm

import (
	"encoding/binary"
	"fmt"
)

// Message is one connection manager message.
type Message interface {
	// Type is the message's type.
	Type() Type
	// IDs returns the sender's connection id and the receiver's.
	IDs() (local, remote uint32)
	// Append appends the message as a whole frame to b. A field out of
	// range (private data above its limit, a 24-bit number above 2^24) is
	// an error and b is not extended.
	Append(b []byte) ([]byte, error)
}

// MaxPrivateData is how many bytes of private data a message of type t
// carries at most: rdma_cm's limits over IB (its REQ gives 36 of the IB
// CM's 92 bytes to its own header).
func MaxPrivateData(t Type) int {
	switch t {
	case TypeREQ:
		return 56
	case TypeREP:
		return 196
	case TypeRTU:
		return 224
	case TypeREJ:
		return 148
	case TypeDREQ, TypeDREP:
		return 220
	}
	return 0
}

// MaxRejectText bounds the reason text of a REJ.
const MaxRejectText = 128

// Max24 is the largest QPN or PSN: both are 24-bit numbers.
const Max24 = 1<<24 - 1

func parseBody(t Type, b []byte) (Message, error) {
	var m Message
	var err error
	switch t {
	case TypeREQ:
		m, err = parseREQ(b)
	case TypeREP:
		m, err = parseREP(b)
	case TypeRTU:
		m, err = parseRTU(b)
	case TypeREJ:
		m, err = parseREJ(b)
	case TypeDREQ:
		m, err = parseDREQ(b)
	case TypeDREP:
		m, err = parseDREP(b)
	default:
		return nil, protoErr(0, ErrType, "type %d", uint8(t))
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// reader consumes a body field by field; the first short read sticks.
type reader struct {
	t   Type
	b   []byte
	err error
}

func (r *reader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if len(r.b) < n {
		r.err = protoErr(r.t, ErrMalformed, "body ends inside %s", what)
		return false
	}
	return true
}

func (r *reader) u8(what string) uint8 {
	if !r.need(1, what) {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16(what string) uint16 {
	if !r.need(2, what) {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32(what string) uint32 {
	if !r.need(4, what) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

// u24 reads a 32-bit field that holds a 24-bit number.
func (r *reader) u24(what string) uint32 {
	v := r.u32(what)
	if r.err == nil && v > Max24 {
		r.err = protoErr(r.t, ErrMalformed, "%s %#x is above 24 bits", what, v)
	}
	return v
}

func (r *reader) gid(what string) (g [16]byte) {
	if r.need(16, what) {
		copy(g[:], r.b)
		r.b = r.b[16:]
	}
	return g
}

// bytes reads a length byte and that many bytes (copied), at most max.
func (r *reader) bytes(what string, max int, tooLong error) []byte {
	n := int(r.u8(what + " length"))
	if r.err != nil {
		return nil
	}
	if n > max {
		r.err = protoErr(r.t, tooLong, "%s of %d bytes is above %d", what, n, max)
		return nil
	}
	if !r.need(n, what) {
		return nil
	}
	if n == 0 {
		return nil
	}
	v := append([]byte(nil), r.b[:n]...)
	r.b = r.b[n:]
	return v
}

// ids reads the two connection ids every body starts with.
func (r *reader) ids() (local, remote uint32) {
	local = r.u32("the local id")
	remote = r.u32("the remote id")
	return local, remote
}

// done reports the sticky error, or one for bytes left over.
func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = protoErr(r.t, ErrMalformed, "%d bytes after the last field", len(r.b))
	}
	return r.err
}

// writer appends a body; a field out of range sets err and the caller
// drops what was written.
type writer struct {
	t      Type
	b      []byte
	lenOff int
	err    error
}

func newWriter(b []byte, t Type) *writer {
	w := &writer{t: t}
	w.b, w.lenOff = appendHeader(b, t)
	return w
}

func (w *writer) u8(v uint8)   { w.b = append(w.b, v) }
func (w *writer) u16(v uint16) { w.b = binary.BigEndian.AppendUint16(w.b, v) }
func (w *writer) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }

func (w *writer) u24(v uint32, what string) {
	if v > Max24 && w.err == nil {
		w.err = protoErr(w.t, ErrMalformed, "%s %#x is above 24 bits", what, v)
	}
	w.u32(v)
}

func (w *writer) gid(g [16]byte) { w.b = append(w.b, g[:]...) }

func (w *writer) bytes(v []byte, what string, max int, tooLong error) {
	if len(v) > max && w.err == nil {
		w.err = protoErr(w.t, tooLong, "%s of %d bytes is above %d", what, len(v), max)
		return
	}
	w.u8(uint8(len(v)))
	w.b = append(w.b, v...)
}

func (w *writer) privateData(v []byte) {
	w.bytes(v, "private data", MaxPrivateData(w.t), ErrPrivateData)
}

// finish returns the frame, or the original b and the error.
func (w *writer) finish(orig []byte) ([]byte, error) {
	if w.err != nil {
		return orig, w.err
	}
	b, err := finish(w.b, w.t, w.lenOff)
	if err != nil {
		return orig, err
	}
	return b, nil
}

func (r *reader) privateData() []byte {
	return r.bytes("private data", MaxPrivateData(r.t), ErrPrivateData)
}

// needIDs checks that a message carries the ids its type needs: a REQ
// only the sender's (the receiver has given it none yet); a REJ at least
// one (a requester that gives up before any reply knows only its own, a
// responder that refuses a request it never gave an id only the
// requester's); every other message both.
func needIDs(t Type, local, remote uint32) error {
	switch {
	case t == TypeREQ && local == 0:
		return protoErr(t, ErrMalformed, "local id 0: every connection has an id")
	case t == TypeREQ && remote != 0:
		return protoErr(t, ErrMalformed, "a REQ carries remote id %#x: it must be 0", remote)
	case t == TypeREJ && local == 0 && remote == 0:
		return protoErr(t, ErrMalformed, "both ids are 0: the REJ names no connection")
	case t != TypeREQ && t != TypeREJ && local == 0:
		return protoErr(t, ErrMalformed, "local id 0: every connection has an id")
	case t != TypeREQ && t != TypeREJ && remote == 0:
		return protoErr(t, ErrMalformed, "remote id 0: the message must name the connection it is for")
	}
	return nil
}

func (r *reader) checkIDs(local, remote uint32) {
	if r.err == nil {
		if err := needIDs(r.t, local, remote); err != nil {
			r.err = err
		}
	}
}

func (w *writer) ids(local, remote uint32) {
	if err := needIDs(w.t, local, remote); err != nil && w.err == nil {
		w.err = err
	}
	w.u32(local)
	w.u32(remote)
}

func badField(t Type, format string, args ...any) error {
	return protoErr(t, ErrMalformed, "%s", fmt.Sprintf(format, args...))
}
