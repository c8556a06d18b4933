package pcap

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// Reader reads the packet records of a classic pcap file in order.
type Reader struct {
	r        io.Reader
	order    binary.ByteOrder
	nano     bool
	snaplen  uint32
	linkType int
	hdr      [recordHeaderLen]byte
	buf      []byte
	ts       time.Time
	origLen  int
}

// NewReader reads the file header from r and returns a Reader positioned at
// the first record. It accepts both byte orders and both the microsecond
// and the nanosecond magic number.
func NewReader(r io.Reader) (*Reader, error) {
	var h [fileHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, fmt.Errorf("pcap: reading file header: %w", err)
	}
	rd := &Reader{r: r}
	switch {
	case binary.LittleEndian.Uint32(h[:]) == magicMicro:
		rd.order = binary.LittleEndian
	case binary.LittleEndian.Uint32(h[:]) == magicNano:
		rd.order, rd.nano = binary.LittleEndian, true
	case binary.BigEndian.Uint32(h[:]) == magicMicro:
		rd.order = binary.BigEndian
	case binary.BigEndian.Uint32(h[:]) == magicNano:
		rd.order, rd.nano = binary.BigEndian, true
	default:
		return nil, fmt.Errorf("%w: magic %#08x is not classic pcap (pcapng? convert with editcap -F pcap)",
			ErrFormat, binary.BigEndian.Uint32(h[:]))
	}
	if major := rd.order.Uint16(h[4:]); major != 2 {
		return nil, fmt.Errorf("%w: version %d.%d, want 2.x", ErrFormat, major, rd.order.Uint16(h[6:]))
	}
	rd.snaplen = rd.order.Uint32(h[16:])
	// The upper bits of the link-type field hold an FCS length flag.
	rd.linkType = int(rd.order.Uint32(h[20:]) & 0x0fffffff)
	return rd, nil
}

// LinkType returns the file's link type (LinkTypeEthernet, ...).
func (r *Reader) LinkType() int { return r.linkType }

// Nanosecond reports whether the file's timestamps have nanosecond
// resolution.
func (r *Reader) Nanosecond() bool { return r.nano }

// Next returns the captured bytes of the next record and the file's link
// type. data is valid until the next call. At the end of the file it
// returns io.EOF; a record cut short returns io.ErrUnexpectedEOF.
func (r *Reader) Next() (data []byte, linkType int, err error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, 0, fmt.Errorf("pcap: record header: %w", err)
		}
		return nil, 0, err
	}
	sec := r.order.Uint32(r.hdr[0:])
	frac := r.order.Uint32(r.hdr[4:])
	incl := r.order.Uint32(r.hdr[8:])
	orig := r.order.Uint32(r.hdr[12:])
	if incl > maxRecordLen {
		return nil, 0, fmt.Errorf("%w: record of %d bytes", ErrFormat, incl)
	}
	if !r.nano {
		frac *= 1000
	}
	r.ts = time.Unix(int64(sec), int64(frac))
	r.origLen = int(orig)
	if cap(r.buf) < int(incl) {
		r.buf = make([]byte, incl)
	}
	r.buf = r.buf[:incl]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, fmt.Errorf("pcap: record data: %w", err)
	}
	return r.buf, r.linkType, nil
}

// Timestamp returns the capture time of the record Next last returned.
func (r *Reader) Timestamp() time.Time { return r.ts }

// OrigLen returns the original length on the wire of the record Next last
// returned; it exceeds len(data) if the capture was cut at the snapshot
// length.
func (r *Reader) OrigLen() int { return r.origLen }
