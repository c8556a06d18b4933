package verbs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Shared receive queues on the device (csrc/srq.c): made, resized or
// re-armed, queried and destroyed; receives posted to them in batches as
// to a QP's; RC QPs made on one.
const (
	OpCreateSRQ   Op = 24 // u32 max_wr, u32 max_sge, u32 srq_limit, u32 0 → SRQ
	OpModifySRQ   Op = 25 // u32 handle, u32 mask, u32 max_wr, u32 srq_limit → (empty)
	OpQuerySRQ    Op = 26 // u32 handle → SRQAttr
	OpDestroySRQ  Op = 27 // u32 handle → (empty)
	OpPostSRQRecv Op = 28 // u32 SRQ, u32 count, RecvWRs → (empty)
	OpCreateQPSRQ Op = 29 // OpCreateQP's body, u32 SRQ, u32 0 → QP
)

// SRQ modify mask (enum ibv_srq_attr_mask).
const (
	SRQMaxWR = 1 // resize (devices that can)
	SRQLimit = 2 // arm the limit event
)

const srqSize = 16

// SRQAttr is a shared receive queue's size and limit.
type SRQAttr struct {
	MaxWR, MaxSGE, Limit uint32
}

// SRQ is a shared receive queue of the device, in the helper.
type SRQ struct {
	Handle uint32
	Attr   SRQAttr // what the device gave (at least what was asked)
}

// AppendCreateSRQ appends an OpCreateSRQ request.
func AppendCreateSRQ(dst []byte, a SRQAttr) []byte {
	dst = AppendHeader(dst, OpCreateSRQ, 0, 0, srqSize)
	for _, v := range []uint32{a.MaxWR, a.MaxSGE, a.Limit, 0} {
		dst = ne.AppendUint32(dst, v)
	}
	return dst
}

// AppendSRQ is ParseSRQ's input: u32 handle, u32 max_wr, u32 max_sge,
// u32 srq_limit (the helper's reply; tests use it).
func AppendSRQ(dst []byte, s SRQ) []byte {
	for _, v := range []uint32{s.Handle, s.Attr.MaxWR, s.Attr.MaxSGE, s.Attr.Limit} {
		dst = ne.AppendUint32(dst, v)
	}
	return dst
}

// ParseSRQ decodes an OpCreateSRQ reply for a request of asked: the SRQ
// has at least the entries and SGEs asked (rdma-core's contract) and a
// limit no larger than its entries.
func ParseSRQ(b []byte, asked SRQAttr) (SRQ, error) {
	if len(b) != srqSize {
		return SRQ{}, protoErrorf("an SRQ of %d bytes, want %d", len(b), srqSize)
	}
	s := SRQ{Handle: ne.Uint32(b), Attr: SRQAttr{ne.Uint32(b[4:]), ne.Uint32(b[8:]), ne.Uint32(b[12:])}}
	if s.Attr.MaxWR < asked.MaxWR || s.Attr.MaxSGE < asked.MaxSGE || s.Attr.Limit > s.Attr.MaxWR {
		return SRQ{}, protoErrorf("an SRQ with %+v for %+v asked", s.Attr, asked)
	}
	return s, nil
}

// AppendModifySRQ appends an OpModifySRQ request setting what mask says.
func AppendModifySRQ(dst []byte, s SRQ, mask uint32, a SRQAttr) []byte {
	dst = AppendHeader(dst, OpModifySRQ, 0, 0, 16)
	for _, v := range []uint32{s.Handle, mask, a.MaxWR, a.Limit} {
		dst = ne.AppendUint32(dst, v)
	}
	return dst
}

// AppendQuerySRQ appends an OpQuerySRQ request.
func AppendQuerySRQ(dst []byte, s SRQ) []byte {
	return ne.AppendUint32(AppendHeader(dst, OpQuerySRQ, 0, 0, 4), s.Handle)
}

// ParseSRQAttr decodes an OpQuerySRQ reply: u32 max_wr, u32 max_sge, u32
// srq_limit, u32 0.
func ParseSRQAttr(b []byte) (SRQAttr, error) {
	if len(b) != srqSize {
		return SRQAttr{}, protoErrorf("SRQ attributes of %d bytes, want %d", len(b), srqSize)
	}
	a := SRQAttr{ne.Uint32(b), ne.Uint32(b[4:]), ne.Uint32(b[8:])}
	switch {
	case ne.Uint32(b[12:]) != 0:
		return SRQAttr{}, protoErrorf("SRQ attributes with padding %#x", ne.Uint32(b[12:]))
	case a.Limit > a.MaxWR:
		return SRQAttr{}, protoErrorf("an SRQ limit %d over its %d entries", a.Limit, a.MaxWR)
	}
	return a, nil
}

// AppendSRQAttr is ParseSRQAttr's input (tests use it).
func AppendSRQAttr(dst []byte, a SRQAttr) []byte {
	for _, v := range []uint32{a.MaxWR, a.MaxSGE, a.Limit, 0} {
		dst = ne.AppendUint32(dst, v)
	}
	return dst
}

// AppendPostSRQRecv appends an OpPostSRQRecv request posting wrs to s as
// one batch; its body and limits are AppendPostRecv's.
func AppendPostSRQRecv(dst []byte, s SRQ, wrs []RecvWR) ([]byte, error) {
	at := len(dst)
	dst, err := AppendPostRecv(dst, QP{Handle: s.Handle}, wrs)
	if err != nil {
		return dst, err
	}
	ne.PutUint16(dst[at+4:], uint16(OpPostSRQRecv))
	return dst, nil
}

// AppendCreateQPSRQ appends an OpCreateQPSRQ request: an RC QP whose
// receives come from s (c's receive capabilities are ignored).
func AppendCreateQPSRQ(dst []byte, send, recv CQ, s SRQ, c QPCap) []byte {
	at := len(dst)
	c.MaxRecvWR, c.MaxRecvSGE = 0, 0
	dst = AppendCreateQP(dst, send, recv, c)
	ne.PutUint32(dst[at:], uint32(HeaderSize+qpSize+8))
	ne.PutUint16(dst[at+4:], uint16(OpCreateQPSRQ))
	return ne.AppendUint32(ne.AppendUint32(dst, s.Handle), 0)
}

// CreateSRQ makes a shared receive queue on the device.
func (d *Device) CreateSRQ(a SRQAttr) (SRQ, error) {
	if int64(a.MaxWR) > int64(d.Attr.MaxQPWR) || int64(a.MaxSGE) > int64(d.Attr.MaxSGE) || a.MaxSGE > MaxWRSGE {
		return SRQ{}, &Error{Kind: ErrDevice, Errno: int32(unix.EINVAL), Msg: fmt.Sprintf("%s: an SRQ of %d entries and %d SGEs; the device takes %d and %d, the helper %d SGEs", d.Name, a.MaxWR, a.MaxSGE, d.Attr.MaxQPWR, d.Attr.MaxSGE, MaxWRSGE)}
	}
	body, err := d.h.Call(AppendCreateSRQ(nil, a))
	if err != nil {
		return SRQ{}, err
	}
	s, err := ParseSRQ(body, a)
	if err != nil {
		return SRQ{}, d.failed(err)
	}
	return s, nil
}

// ModifySRQ resizes s (SRQMaxWR) or arms its limit event (SRQLimit).
func (d *Device) ModifySRQ(s SRQ, mask uint32, a SRQAttr) error {
	return d.callEmpty(AppendModifySRQ(nil, s, mask, a))
}

// QuerySRQ returns s's size and limit as the device has them.
func (d *Device) QuerySRQ(s SRQ) (SRQAttr, error) {
	body, err := d.h.Call(AppendQuerySRQ(nil, s))
	if err != nil {
		return SRQAttr{}, err
	}
	a, err := ParseSRQAttr(body)
	if err != nil {
		return SRQAttr{}, d.failed(err)
	}
	return a, nil
}

// DestroySRQ destroys s (after the QPs on it).
func (d *Device) DestroySRQ(s SRQ) error {
	return d.callEmpty(ne.AppendUint32(AppendHeader(nil, OpDestroySRQ, 0, 0, 4), s.Handle))
}

// PostSRQRecv posts wrs to s as one batch.
func (d *Device) PostSRQRecv(s SRQ, wrs []RecvWR) error {
	d.dp.mu.Lock()
	defer d.dp.mu.Unlock()
	req, err := AppendPostSRQRecv(d.dp.buf[:0], s, wrs)
	if err != nil {
		return err
	}
	d.dp.buf = req
	return d.callEmpty(req)
}

// CreateQPOnSRQ makes an RC QP whose receives come from s.
func (d *Device) CreateQPOnSRQ(send, recv CQ, s SRQ, c QPCap) (QP, error) {
	c.MaxRecvWR, c.MaxRecvSGE = 0, 0
	body, err := d.h.Call(AppendCreateQPSRQ(nil, send, recv, s, c))
	if err != nil {
		return QP{}, err
	}
	q, err := ParseQP(body, c)
	if err != nil {
		return QP{}, d.failed(err)
	}
	return q, nil
}
