package tcplink

import (
	"net"
	"sync"
)

// Sealed records. A TLS connection (crypto/tls) writes every record it
// makes to its transport at once: a 1 MiB queue drain was 64 write(2)s of
// 16 KiB, each pushed out on its own (the connection has TCP_NODELAY), and
// a write cut short by a full socket buffer would leave a record half
// written, so TLS connections could not take direct writes. So a TLS
// connection runs over a sealConn: during the handshake it passes writes
// through; after it, it keeps the records — sealed, ready for the wire —
// in a buffer, and the link writes that buffer itself, as it writes a
// plain connection's frames: in one write(2) per drain, directly and
// without blocking from WriteBatch (direct.go) or blocking from the writer
// (writer.go). What a short write leaves stays in front of the buffer, for
// the writer; it belongs to that connection, as the records are sealed
// with its keys.

// sealConn is the transport under a TLS connection: net.Conn is the TCP
// connection (or the gate's watcher of it, for reads during the
// handshake).
type sealConn struct {
	net.Conn

	mu      sync.Mutex
	capture bool   // after the handshake: keep records instead of writing them
	sealing bool   // the peer's writer is in seal: it takes what comes
	sealed  []byte // records not yet written to the socket
	spare   []byte // sealed's other buffer
	late    func() // called when records come outside seal (an alert, a key update's answer)
}

// Write keeps b, a TLS record, after the handshake; before, it writes it.
func (s *sealConn) Write(b []byte) (int, error) {
	s.mu.Lock()
	if !s.capture {
		s.mu.Unlock()
		return s.Conn.Write(b)
	}
	s.sealed = append(s.sealed, b...)
	late := !s.sealing && s.late != nil
	s.mu.Unlock()
	if late {
		s.late()
	}
	return len(b), nil
}

// startCapture makes writes kept from now on; late is called for those
// that come outside seal.
func (s *sealConn) startCapture(late func()) {
	s.mu.Lock()
	s.capture, s.late = true, late
	s.mu.Unlock()
}

// backlog is how many sealed bytes wait for the socket.
func (s *sealConn) backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sealed)
}

// take returns the records waiting for the socket; the caller writes them
// and gives the buffer back with putBack.
func (s *sealConn) take() []byte {
	s.mu.Lock()
	out := s.sealed
	s.sealed, s.spare = s.spare[:0], nil
	s.mu.Unlock()
	return out
}

// putBack returns out, of which the socket took n bytes: the rest goes in
// front of what was sealed meanwhile.
func (s *sealConn) putBack(out []byte, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == len(out) {
		s.spare = out[:0]
		return
	}
	rest := copy(out, out[n:])
	out = append(out[:rest], s.sealed...)
	s.spare = s.sealed[:0]
	s.sealed = out
}

// seal encrypts frames into c's sealed records. Only the writer of c's
// peer (peer.writing) calls it.
func (c *conn) seal(frames []byte) error {
	s := c.sl
	s.mu.Lock()
	s.sealing = true
	s.mu.Unlock()
	_, err := c.nc.Write(frames)
	s.mu.Lock()
	s.sealing = false
	s.mu.Unlock()
	return err
}

// drainSealed writes c's sealed records, blocking (under the write
// deadline set on c.raw).
func (c *conn) drainSealed() error {
	s := c.sl
	for {
		out := s.take()
		if len(out) == 0 {
			s.putBack(out, 0)
			return nil
		}
		n, err := c.raw.Write(out)
		s.putBack(out, n)
		if err != nil {
			return err
		}
	}
}

// writeFrames writes frames (with their length prefixes) to c, blocking:
// in one write on a plain connection, sealed and drained with whatever was
// sealed before on a TLS one.
func (c *conn) writeFrames(frames []byte) error {
	if c.sl == nil {
		_, err := c.nc.Write(frames)
		return err
	}
	if len(frames) > 0 {
		if err := c.seal(frames); err != nil {
			return err
		}
	}
	return c.drainSealed()
}
