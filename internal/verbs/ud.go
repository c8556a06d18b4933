package verbs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// CreateUDQP makes a UD QP on the device whose send and receive
// completions go to send and recv; its limits are CreateQP's. A device
// without UD (iWARP) refuses it with rdma-core's EOPNOTSUPP.
func (d *Device) CreateUDQP(send, recv CQ, c QPCap) (QP, error) {
	if d.Attr.Transport == TransportIWARP {
		return QP{}, &Error{Kind: ErrDevice, Errno: int32(unix.EOPNOTSUPP), Msg: fmt.Sprintf("%s is an iWARP device: it has no UD QPs", d.Name)}
	}
	if err := d.checkCap(c); err != nil {
		return QP{}, err
	}
	body, err := d.h.Call(AppendCreateQPOf(nil, send, recv, c, QPTypeUD))
	if err != nil {
		return QP{}, err
	}
	q, err := ParseQP(body, c)
	if err != nil {
		return QP{}, d.failed(err)
	}
	return q, nil
}

// ModifyUDQP moves UD QP qp to state: INIT with qkey (the caller has
// checked that a controlled Q_Key, high bit set, is the client's to set),
// RTS with the send PSN sqPSN.
func (d *Device) ModifyUDQP(qp QP, state, qkey, sqPSN uint32) error {
	return d.callEmpty(AppendModifyUDQP(nil, qp, state, qkey, sqPSN))
}

// CreateAH makes an address handle on the device.
func (d *Device) CreateAH(a AHAttr) (AH, error) {
	body, err := d.h.Call(AppendCreateAH(nil, a))
	if err != nil {
		return AH{}, err
	}
	ah, err := ParseAH(body)
	if err != nil {
		return AH{}, d.failed(err)
	}
	return ah, nil
}

// DestroyAH destroys an address handle.
func (d *Device) DestroyAH(ah AH) error {
	return d.callEmpty(ne.AppendUint32(AppendHeader(nil, OpDestroyAH, 0, 0, 4), ah.Handle))
}

// PostSendUD posts wrs to UD QP qp's send queue as one batch: one message
// and one ibv_post_send. A work request the helper refuses (an unknown AH,
// an SGE outside its region) fails the batch and posts none.
func (d *Device) PostSendUD(qp QP, wrs []UDSendWR) error {
	d.dp.mu.Lock()
	defer d.dp.mu.Unlock()
	req, err := AppendPostSendUD(d.dp.buf[:0], qp, wrs)
	if err != nil {
		return err
	}
	d.dp.buf = req
	return d.callEmpty(req)
}
