package tcplink

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// readBufSize is a connection's read buffer: frames are returned in place
// from it, so it must hold the largest frame and its length.
const readBufSize = 256 << 10

// frameReader splits a connection's byte stream, after the hello, into
// frames. It allocates nothing per frame.
type frameReader struct {
	br   *bufio.Reader
	done int // bytes of the last frame returned, to discard
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{br: bufio.NewReaderSize(r, readBufSize)}
}

// next returns the next frame: an empty one for a keepalive, else one
// whole IP packet, in place in the read buffer until the next call. It
// returns io.EOF when the stream ends between frames, a *ProtocolError
// (without the remote address) for a length above MaxFrame, bytes that are
// not one whole IP packet or a stream that ends mid-frame, and the
// reader's other errors as they are.
func (r *frameReader) next() ([]byte, error) {
	if r.done > 0 {
		_, _ = r.br.Discard(r.done)
		r.done = 0
	}
	h, err := r.br.Peek(frameHeaderLen)
	if err != nil {
		if errors.Is(err, io.EOF) && len(h) > 0 {
			return nil, frameErr("connection closed mid-frame: %d of the 4 length bytes came", len(h))
		}
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(h))
	if n > MaxFrame {
		return nil, frameErr("frame length %d is above the largest, %d", n, MaxFrame)
	}
	b, err := r.br.Peek(frameHeaderLen + n)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, frameErr("connection closed mid-frame: %d of its %d bytes came", len(b)-frameHeaderLen, n)
		}
		return nil, err
	}
	f := b[frameHeaderLen:]
	if n > 0 {
		if _, why := frameDst(f); why != "" {
			return nil, frameErr("a frame that is not one whole IP packet: %s", why)
		}
	}
	r.done = frameHeaderLen + n
	return f, nil
}

func frameErr(format string, args ...any) error {
	return &ProtocolError{Stage: "frame", Reason: fmt.Sprintf(format, args...)}
}
