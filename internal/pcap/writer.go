package pcap

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// Writer writes a little-endian classic pcap file.
type Writer struct {
	w    io.Writer
	nano bool
	hdr  [recordHeaderLen]byte
}

// NewWriter writes a file header with microsecond timestamps, snapshot
// length DefaultSnaplen and the given link type to w.
func NewWriter(w io.Writer, linkType int) (*Writer, error) {
	return newWriter(w, linkType, false)
}

// NewWriterNanosecond is NewWriter for a file with nanosecond timestamps.
func NewWriterNanosecond(w io.Writer, linkType int) (*Writer, error) {
	return newWriter(w, linkType, true)
}

func newWriter(w io.Writer, linkType int, nano bool) (*Writer, error) {
	var h [fileHeaderLen]byte
	magic := uint32(magicMicro)
	if nano {
		magic = magicNano
	}
	le := binary.LittleEndian
	le.PutUint32(h[0:], magic)
	le.PutUint16(h[4:], 2)
	le.PutUint16(h[6:], 4)
	le.PutUint32(h[16:], DefaultSnaplen)
	le.PutUint32(h[20:], uint32(linkType))
	if _, err := w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("pcap: writing file header: %w", err)
	}
	return &Writer{w: w, nano: nano}, nil
}

// WritePacket writes one record: data, captured at ts. Data longer than
// DefaultSnaplen is cut to it, with its original length recorded.
func (w *Writer) WritePacket(ts time.Time, data []byte) error {
	orig := len(data)
	if len(data) > DefaultSnaplen {
		data = data[:DefaultSnaplen]
	}
	frac := ts.Nanosecond()
	if !w.nano {
		frac /= 1000
	}
	le := binary.LittleEndian
	le.PutUint32(w.hdr[0:], uint32(ts.Unix()))
	le.PutUint32(w.hdr[4:], uint32(frac))
	le.PutUint32(w.hdr[8:], uint32(len(data)))
	le.PutUint32(w.hdr[12:], uint32(orig))
	if _, err := w.w.Write(w.hdr[:]); err != nil {
		return fmt.Errorf("pcap: writing record header: %w", err)
	}
	if _, err := w.w.Write(data); err != nil {
		return fmt.Errorf("pcap: writing record: %w", err)
	}
	return nil
}
