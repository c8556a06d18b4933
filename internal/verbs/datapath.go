package verbs

import "sync"

// dataPath holds the buffer the data path's requests are built in, so that
// posting and polling allocate nothing.
type dataPath struct {
	mu  sync.Mutex
	buf []byte
}

// failed marks the helper dead with err (a reply that broke the protocol).
func (d *Device) failed(err error) error {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	return d.h.failLocked(err)
}

// CreateCQ makes a completion queue of at least cqe entries on the device.
func (d *Device) CreateCQ(cqe uint32) (CQ, error) {
	body, err := d.h.Call(AppendCreateCQ(nil, cqe))
	if err != nil {
		return CQ{}, err
	}
	c, err := ParseCQ(body, cqe)
	if err != nil {
		return CQ{}, d.failed(err)
	}
	return c, nil
}

// DestroyCQ destroys a CQ; one a QP still uses is EBUSY (ErrDevice).
func (d *Device) DestroyCQ(c CQ) error {
	_, err := d.h.Call(ne.AppendUint32(AppendHeader(nil, OpDestroyCQ, 0, 0, 4), c.Handle))
	return err
}

// CreateQP makes an RC QP on the device whose send and receive
// completions go to send and recv. What the device cannot give (more work
// requests or SGEs than it has) is rdma-core's error (ErrDevice, EINVAL).
func (d *Device) CreateQP(send, recv CQ, c QPCap) (QP, error) {
	body, err := d.h.Call(AppendCreateQP(nil, send, recv, c))
	if err != nil {
		return QP{}, err
	}
	q, err := ParseQP(body, c)
	if err != nil {
		return QP{}, d.failed(err)
	}
	return q, nil
}

// ModifyQP moves qp to a.State with the attributes that transition takes
// (QPAttr).
func (d *Device) ModifyQP(qp QP, a QPAttr) error {
	_, err := d.h.Call(AppendModifyQP(nil, qp, a))
	return err
}

// DestroyQP destroys a QP.
func (d *Device) DestroyQP(qp QP) error {
	_, err := d.h.Call(ne.AppendUint32(AppendHeader(nil, OpDestroyQP, 0, 0, 4), qp.Handle))
	return err
}

// PostSend posts wrs to qp's send queue as one batch: one message to the
// helper and one ibv_post_send. A work request the helper refuses (an SGE
// outside its region, an unknown opcode) fails the batch and posts none;
// one the device refuses is rdma-core's errno naming the work request.
func (d *Device) PostSend(qp QP, wrs []SendWR) error {
	d.dp.mu.Lock()
	defer d.dp.mu.Unlock()
	req, err := AppendPostSend(d.dp.buf[:0], qp, wrs)
	if err != nil {
		return err
	}
	d.dp.buf = req
	_, err = d.h.Call(req)
	return err
}

// PostRecv posts wrs to qp's receive queue as one batch.
func (d *Device) PostRecv(qp QP, wrs []RecvWR) error {
	d.dp.mu.Lock()
	defer d.dp.mu.Unlock()
	req, err := AppendPostRecv(d.dp.buf[:0], qp, wrs)
	if err != nil {
		return err
	}
	d.dp.buf = req
	_, err = d.h.Call(req)
	return err
}

// PollCQ fills wcs with up to len(wcs) (at most MaxPoll) of cq's
// completions and returns how many; 0 when there are none. It does not wait.
func (d *Device) PollCQ(cq CQ, wcs []WC) (int, error) {
	if len(wcs) > MaxPoll {
		wcs = wcs[:MaxPoll]
	}
	if len(wcs) == 0 {
		return 0, nil
	}
	d.dp.mu.Lock()
	defer d.dp.mu.Unlock()
	d.dp.buf = AppendPollCQ(d.dp.buf[:0], cq, uint32(len(wcs)))
	d.h.mu.Lock() // the reply's body is the helper's buffer: parse it before another call
	defer d.h.mu.Unlock()
	body, err := d.h.callLocked(d.dp.buf, -1)
	if err != nil {
		return 0, err
	}
	n, err := ParseWCs(body, wcs)
	if err != nil {
		return 0, d.h.failLocked(err)
	}
	return n, nil
}
