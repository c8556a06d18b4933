package tcplink

import (
	"encoding/binary"
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Direct writes. Handing every frame to the peer's writer goroutine costs a
// goroutine wake-up per message, which on a small VM is tens of
// microseconds each way. So WriteBatch first tries to write the queue on
// its own goroutine, without blocking: one non-blocking write(2) of what
// the socket buffer takes. What does not fit stays queued for the writer,
// which blocks as before. Never blocking here matters: a daemon's receiver
// answers on the goroutine that reads, and two receivers blocked writing
// to each other would never read again. A TLS connection's frames are
// sealed into records first, and the records written the same way
// (seal.go).

// directMax is the most queued bytes a direct write takes on.
const directMax = 64 << 10

// rawConnOf returns the raw descriptor access of a TCP connection, or nil.
func rawConnOf(nc net.Conn) syscall.RawConn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// tryWrite writes what the socket takes now of b, without waiting. Only
// the peer's one writer at a time calls it (peer.writing).
func (c *conn) tryWrite(b []byte) (int, error) {
	w := &c.dw
	w.b, w.n, w.err = b, 0, nil
	err := c.sc.Write(w.fn)
	n, werr := w.n, w.err
	w.b = nil
	if err != nil {
		return n, err
	}
	return n, werr
}

// directWrite is a connection's non-blocking write(2) loop, with its
// arguments and results in fields: a closure capturing them would be
// allocated on every write.
type directWrite struct {
	b   []byte
	n   int
	err error
	fn  func(fd uintptr) bool // write, bound once
}

func (w *directWrite) write(fd uintptr) bool {
	for w.n < len(w.b) {
		k, err := unix.Write(int(fd), w.b[w.n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			if err != unix.EAGAIN {
				w.err = err
			}
			break
		}
		w.n += k
	}
	return true // never wait for the socket
}

// flush is called with p.mu held, after frames were queued, and unlocks
// it: the queue is written directly if nobody is writing and the
// connection allows it, else the writer is woken.
func (p *peer) flush() {
	c := p.conn
	if c == nil || c.sc == nil || p.writing || p.headConn != nil || len(p.pending) == 0 || len(p.pending) > directMax ||
		c.sl != nil && c.sl.backlog() > 0 {
		p.mu.Unlock()
		p.signal()
		return
	}
	out, frames := p.pending, p.pendingFrames
	p.pending, p.pendingFrames = p.dspare[:0], 0
	p.writing = true
	p.mu.Unlock()
	if c.sl != nil {
		p.flushSealed(c, out, frames)
		return
	}

	n, err := c.tryWrite(out)
	done, headLen := countFrames(out, n)
	l := p.l
	l.stats.directWrites.Add(1)
	if n < len(out) {
		l.stats.directShort.Add(1)
	}
	l.stats.framesOut.Add(uint64(done))
	l.stats.bytesOut.Add(uint64(bytesOfFrames(out, done)))

	p.mu.Lock()
	p.writing = false
	wake := false
	switch {
	case n == len(out):
		p.dspare = out[:0]
	case err != nil || p.merged != nil || p.conn != c:
		// The connection broke (or the peer moved): what was not written
		// is lost with it, as the writer loses a failed write.
		l.stats.droppedConnLost.Add(uint64(frames - done))
		p.dspare = out[:0]
		wake = true
	default:
		// The socket buffer is full: the rest goes in front of what was
		// queued meanwhile, for the writer.
		rest := copy(out, out[n:])
		out = append(out[:rest], p.pending...)
		p.dspare = p.pending[:0]
		p.pending = out
		p.pendingFrames += frames - done
		if headLen > 0 {
			p.headConn, p.headLen = c, headLen
		}
		wake = true
	}
	wake = wake || len(p.pending) > 0 || len(p.toShut) > 0
	p.mu.Unlock()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		c.close(err)
	}
	if wake {
		p.signal()
	}
}

// flushSealed is flush on a TLS connection, with p.writing set: the
// frames are sealed and the records written without waiting; what the
// socket does not take stays in the connection's sealed records, for the
// writer.
func (p *peer) flushSealed(c *conn, out []byte, frames int) {
	l := p.l
	var n, size int
	err := c.seal(out)
	if err == nil {
		rec := c.sl.take()
		size = len(rec)
		n, err = c.tryWrite(rec)
		c.sl.putBack(rec, n)
		l.stats.directWrites.Add(1)
		if n < size {
			l.stats.directShort.Add(1)
		}
		l.stats.framesOut.Add(uint64(frames))
		l.stats.bytesOut.Add(uint64(len(out) - frameHeaderLen*frames))
	} else {
		l.stats.droppedConnLost.Add(uint64(frames))
	}
	p.mu.Lock()
	p.writing = false
	p.dspare = out[:0]
	wake := err != nil || n < size || len(p.pending) > 0 || len(p.toShut) > 0
	p.mu.Unlock()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		c.close(err)
	}
	if wake {
		p.signal()
	}
}

// doneWriting ends the writer's write and lets direct writes start again.
func (p *peer) doneWriting() {
	p.mu.Lock()
	p.writing = false
	p.mu.Unlock()
}

// dropHead discards the rest of a frame half written on a connection that
// is gone; p.mu is held.
func (p *peer) dropHead() {
	if p.headConn == nil {
		return
	}
	k := copy(p.pending, p.pending[p.headLen:])
	p.pending = p.pending[:k]
	p.pendingFrames--
	p.headConn, p.headLen = nil, 0
	p.l.stats.droppedConnLost.Add(1)
}

// countFrames returns how many whole frames of the queue b its first n
// bytes hold, and, if they end inside a frame, how many bytes of it are
// left.
func countFrames(b []byte, n int) (frames, left int) {
	o := 0
	for o < n {
		end := o + frameHeaderLen + int(binary.BigEndian.Uint32(b[o:]))
		if end > n {
			return frames, end - n
		}
		frames++
		o = end
	}
	return frames, 0
}

// bytesOfFrames returns the packet bytes (without length prefixes) of the
// first frames of the queue b.
func bytesOfFrames(b []byte, frames int) int {
	o, total := 0, 0
	for i := 0; i < frames; i++ {
		k := int(binary.BigEndian.Uint32(b[o:]))
		total += k
		o += frameHeaderLen + k
	}
	return total
}
