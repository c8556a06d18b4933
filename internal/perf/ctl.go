package perf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ctl is one end of a control connection: it sends and receives messages,
// each within a deadline, so that a peer that says nothing or says
// something else cannot hang us.
type ctl struct {
	conn net.Conn
	r    *bufio.Reader
	who  string // the other end, for errors: "the server at 192.0.2.1:19765", "the client"
	buf  []byte
}

func newCtl(conn net.Conn, who string) *ctl {
	return &ctl{conn: conn, r: bufio.NewReaderSize(conn, maxMsg), who: who}
}

// PeerError is an error the other end of a control connection reported.
type PeerError struct {
	Peer string // "the server at 192.0.2.1:19765"
	Text string
}

func (e *PeerError) Error() string { return e.Peer + ": " + e.Text }

// closedError is a connection the other end closed between two messages;
// it is io.EOF to errors.Is.
type closedError struct{ text string }

func (e *closedError) Error() string        { return e.text }
func (e *closedError) Is(target error) bool { return target == io.EOF }

// send writes m within timeout.
func (c *ctl) send(m *message, timeout time.Duration) error {
	b, err := appendMessage(c.buf[:0], m)
	if err != nil {
		return err
	}
	c.buf = b
	_ = c.conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.conn.Write(b); err != nil {
		return fmt.Errorf("sending %s to %s: %w", m.Type, c.who, err)
	}
	return nil
}

// recv reads one message within timeout and checks that its type is one
// of want. An error message from the other end comes back as a *PeerError.
func (c *ctl) recv(timeout time.Duration, want ...string) (message, error) {
	what := `"` + strings.Join(want, `" or "`) + `"`
	_ = c.conn.SetReadDeadline(time.Now().Add(timeout))
	line, err := c.r.ReadSlice('\n')
	switch {
	case err == nil:
	case errors.Is(err, bufio.ErrBufferFull):
		return message{}, fmt.Errorf("%s sent %d bytes without a newline where %s was due: it does not speak vrdma perf's protocol (JSON lines of at most %d bytes)", c.who, len(line), what, maxMsg)
	case errors.Is(err, os.ErrDeadlineExceeded):
		if len(line) > 0 {
			return message{}, fmt.Errorf("%s sent %.80q and then nothing for %v where %s was due", c.who, line, timeout, what)
		}
		return message{}, fmt.Errorf("%s sent no %s in %v", c.who, what, timeout)
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET):
		if len(line) > 0 {
			return message{}, fmt.Errorf("%s sent %.80q and closed the connection where %s was due", c.who, line, what)
		}
		return message{}, &closedError{fmt.Sprintf("%s closed the connection where %s was due", c.who, what)}
	default:
		return message{}, fmt.Errorf("reading %s from %s: %w", what, c.who, err)
	}
	m, err := parseMessage(bytes.TrimRight(line, "\r\n"))
	if err != nil {
		return m, fmt.Errorf("%s sent %w", c.who, err)
	}
	if m.Type == msgError {
		return m, &PeerError{Peer: c.who, Text: m.Error}
	}
	if !slices.Contains(want, m.Type) {
		return m, fmt.Errorf("%s sent %q where %s was due: the two ends are out of step", c.who, m.Type, what)
	}
	return m, nil
}

// fail tells the other end about err, as best it can, and closes the
// connection. An error the other end reported itself is not sent back.
func (c *ctl) fail(err error, timeout time.Duration) {
	if pe := (*PeerError)(nil); !errors.As(err, &pe) {
		_ = c.send(errorMsg(err), timeout)
	}
	c.conn.Close()
}
