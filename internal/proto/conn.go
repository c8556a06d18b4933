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
type Conn struct {
	c   *net.UnixConn
	wmu sync.Mutex
	buf []byte
	oob []byte

	sender Sender // of the message Recv returned last (sender.go)
}

// NewConn wraps a connected unixpacket socket.
func NewConn(c *net.UnixConn) *Conn {
	return &Conn{c: c, buf: make([]byte, MaxMessage+1), oob: make([]byte, unix.CmsgSpace(4*MaxFDs)+unix.CmsgSpace(unix.SizeofUcred))}
}

// Dial connects to the daemon socket at path.
func Dial(path string) (*Conn, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	return NewConn(c), nil
}

// Send writes one message whose body is v encoded (nil for none) with fds.
func (c *Conn) Send(h Header, v any, fds ...int) error {
	var body []byte
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			return fmt.Errorf("proto: encode %v: %w", h.Op, err)
		}
	}
	h.Version = Version
	h.BodyLen = uint32(len(body))
	msg := AppendHeader(make([]byte, 0, HeaderSize+len(body)), h)
	msg = append(msg, body...)
	if len(msg) > MaxMessage {
		return ErrTooLarge
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _, err := c.c.WriteMsgUnix(msg, oob, nil)
	return err
}

// Recv reads one message. The body aliases an internal buffer valid until the
// next Recv. Received descriptors are returned even when the message is bad;
// the caller owns and must close them.
func (c *Conn) Recv() (Header, []byte, []int, error) {
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
