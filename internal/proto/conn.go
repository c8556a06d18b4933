package proto

import (
	"encoding/json"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// Conn sends and receives whole messages with descriptors on a unix
// SOCK_SEQPACKET connection. Send is safe for concurrent use; Recv is not.
// A reply larger than one message goes as parts (KindMore), which Send
// writes back to back and Recv, on a client's connection only, puts
// together again: the daemon's side refuses a part at once.
type Conn struct {
	c    *net.UnixConn
	wmu  sync.Mutex
	wbuf []byte // the message being written (wmu)
	buf  []byte
	oob  []byte
	asm  []byte // a reply being put together from its parts (Recv)

	// parts: Recv puts replies sent in parts together (a client's
	// connection); without it a part is refused (the daemon's side).
	parts bool

	sender Sender // of the message Recv returned last (sender.go)
}

// NewConn wraps a connected unixpacket socket on the daemon's side: Recv
// refuses a message marked KindMore (ErrParts), for only the daemon sends
// replies, so a peer cannot make it hold parts or their descriptors.
func NewConn(c *net.UnixConn) *Conn {
	return &Conn{c: c, buf: make([]byte, MaxMessage+1), oob: make([]byte, unix.CmsgSpace(4*MaxFDs)+unix.CmsgSpace(unix.SizeofUcred))}
}

// NewClientConn wraps a connected unixpacket socket to the daemon: Recv
// puts a reply sent in parts together.
func NewClientConn(c *net.UnixConn) *Conn {
	pc := NewConn(c)
	pc.parts = true
	return pc
}

// Dial connects to the daemon socket at path.
func Dial(path string) (*Conn, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	return NewClientConn(c), nil
}

// Send writes one message whose body is v encoded (nil for none) with fds.
// A reply whose body is larger than MaxBody goes as parts of at most
// MaxBody, written without another message between them, the descriptors
// with the first; any other message, or a reply larger than MaxReply, is
// refused with ErrTooLarge and nothing is sent.
func (c *Conn) Send(h Header, v any, fds ...int) error {
	var body []byte
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			return fmt.Errorf("proto: encode %v: %w", h.Op, err)
		}
	}
	if len(body) > MaxBody && h.Kind != KindReply {
		return fmt.Errorf("%w: a %v message of %d bytes (only replies may be larger than %d: they go in parts)", ErrTooLarge, h.Op, len(body), MaxBody)
	}
	if len(body) > MaxReply {
		return fmt.Errorf("%w: a %v reply of %d bytes, above the %d a reply may have", ErrTooLarge, h.Op, len(body), MaxReply)
	}
	h.Version = Version
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for first := true; first || len(body) > 0; first = false {
		part := body[:min(len(body), MaxBody)]
		body = body[len(part):]
		h.More = len(body) > 0
		h.BodyLen = uint32(len(part))
		c.wbuf = append(AppendHeader(c.wbuf[:0], h), part...)
		if _, _, err := c.c.WriteMsgUnix(c.wbuf, oob, nil); err != nil {
			return err
		}
		oob = nil // the descriptors go with the first part
	}
	return nil
}

// Recv reads one message, or (on a client's connection) all the parts of
// a reply. The body aliases an internal buffer valid until the next Recv.
// Received descriptors are returned even when the message is bad; the
// caller owns and must close them.
func (c *Conn) Recv() (Header, []byte, []int, error) {
	if cap(c.asm) > MaxMessage {
		c.asm = nil // the last reply was large: do not hold its buffer
	}
	h, body, fds, err := c.recvOne()
	if err != nil || !h.More {
		return h, body, fds, err
	}
	if !c.parts {
		return h, nil, fds, fmt.Errorf("%w: a %v message marked as a part of a reply: only the daemon sends replies", ErrParts, h.Op)
	}
	first := h
	c.asm = append(c.asm[:0], body...)
	for h.More {
		var more []int
		h, body, more, err = c.recvOne()
		fds = append(fds, more...)
		if err != nil {
			return first, nil, fds, err
		}
		if len(more) > 0 {
			return first, nil, fds, fmt.Errorf("%w: a later part of the %v reply %d carries descriptors (only the first may)", ErrParts, first.Op, first.ID)
		}
		if h.Kind != KindReply || h.Op != first.Op || h.ID != first.ID || h.Code != first.Code {
			return first, nil, fds, fmt.Errorf("%w: a part of the %v reply %d was followed by a %v message of %v", ErrParts, first.Op, first.ID, h.Kind, h.Op)
		}
		if len(c.asm)+len(body) > MaxReply {
			return first, nil, fds, fmt.Errorf("%w: a %v reply of more than %d bytes", ErrTooLarge, first.Op, MaxReply)
		}
		c.asm = append(c.asm, body...)
	}
	if len(fds) > MaxFDs {
		return first, nil, fds, fmt.Errorf("%w: a %v reply with %d descriptors", ErrTooLarge, first.Op, len(fds))
	}
	first.More = false
	first.BodyLen = uint32(len(c.asm))
	return first, c.asm, fds, nil
}

// recvOne reads one message.
func (c *Conn) recvOne() (Header, []byte, []int, error) {
	n, oobn, flags, _, err := c.c.ReadMsgUnix(c.buf, c.oob)
	if err != nil {
		c.sender = Sender{}
		return Header{}, nil, nil, err
	}
	c.sender = parseSender(c.oob[:oobn])
	var fds []int
	if oobn > 0 {
		fds = parseRights(c.oob[:oobn])
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return Header{}, nil, fds, ErrTooLarge
	}
	if n == 0 {
		return Header{}, nil, fds, net.ErrClosed
	}
	h, body, err := ParseHeader(c.buf[:n])
	return h, body, fds, err
}

func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if r, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Raw returns the underlying socket.
func (c *Conn) Raw() *net.UnixConn { return c.c }

// Decode unmarshals a body into v; a malformed body is a CodeInvalid error.
// Unknown fields are ignored so that newer peers can add fields.
func Decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return Errorf(CodeInvalid, "malformed command body: %v", err)
	}
	return nil
}

// CloseFDs closes every descriptor in fds.
func CloseFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
