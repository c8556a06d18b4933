package verbs

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// dataPath holds the buffer the data path's requests are built in, so that
// posting and polling allocate nothing, and the push socket: the helper
// pushes the completions of CQs made with push on a socket of their own,
// which a goroutine of the daemon reads, so that requests and replies keep
// their socket to themselves.
type dataPath struct {
	mu      sync.Mutex
	buf     []byte
	pushMu  sync.Mutex // guards push
	push    *net.UnixConn
	handler atomic.Pointer[func(cq uint32, wcs []WC)]
	pushWCs [MaxPoll]WC // the push reader's
}

// failed marks the helper dead with err (a reply that broke the protocol).
func (d *Device) failed(err error) error {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	return d.h.failLocked(err)
}

// CreateCQ makes a completion queue of at least cqe entries on the
// device. With push, the helper sends its completions as the device
// reports them (its completion channel), to the handler
// SetCompletionHandler set; without, PollCQ fetches them.
func (d *Device) CreateCQ(cqe uint32, push bool) (CQ, error) {
	if !push {
		return d.createCQ(cqe, 0, -1)
	}
	d.dp.pushMu.Lock()
	defer d.dp.pushMu.Unlock()
	if d.dp.push != nil {
		return d.createCQ(cqe, CQPush, -1)
	}
	// The first pushing CQ brings the push socket; the helper keeps it if
	// the CQ is made.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return CQ{}, &Error{Kind: ErrDevice, Msg: "the push socket: " + err.Error()}
	}
	c, err := d.createCQ(cqe, CQPush, fds[1])
	unix.Close(fds[1])
	if err != nil {
		unix.Close(fds[0])
		return CQ{}, err
	}
	f := os.NewFile(uintptr(fds[0]), "verbs-helper-push")
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return CQ{}, d.failed(&Error{Kind: ErrHelperGone, Msg: "the push socket: " + err.Error()})
	}
	d.dp.push = fc.(*net.UnixConn)
	go d.readPushes(d.dp.push)
	return c, nil
}

func (d *Device) createCQ(cqe, flags uint32, fd int) (CQ, error) {
	body, err := d.h.CallFD(AppendCreateCQ(nil, cqe, flags), fd)
	if err != nil {
		return CQ{}, err
	}
	c, err := ParseCQ(body, cqe)
	if err != nil {
		return CQ{}, d.failed(err)
	}
	return c, nil
}

// readPushes reads the helper's pushed completions until the push socket
// closes, handing each message's to the handler; a message that breaks the
// protocol fails the helper.
func (d *Device) readPushes(c *net.UnixConn) {
	defer c.Close()
	buf := make([]byte, MaxMessage+1)
	for {
		n, _, flags, _, err := c.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			return // the helper exited, or the device was closed
		}
		if flags&unix.MSG_TRUNC != 0 {
			d.failed(protoErrorf("a pushed message over %d bytes", MaxMessage))
			return
		}
		if h, herr := ParseHeader(buf[:n]); herr == nil && h.Op() == OpAsyncEvent {
			e, err := ParseAsyncEvent(buf[:n])
			if err != nil {
				c.Close()
				d.failed(err)
				return
			}
			d.handleEvent(e)
			continue
		}
		cq, k, err := parsePush(buf[:n], d.dp.pushWCs[:])
		if err != nil {
			c.Close() // unblocks a helper writing to it before the lock is taken
			d.failed(err)
			return
		}
		if fn := d.dp.handler.Load(); fn != nil {
			(*fn)(cq, d.dp.pushWCs[:k])
		}
	}
}

// parsePush decodes a pushed OpCompletions message into wcs.
func parsePush(msg []byte, wcs []WC) (cq uint32, n int, err error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return 0, 0, err
	}
	body := msg[HeaderSize:]
	if h.Op() != OpCompletions || h.Seq() != 0 || h.Status() != 0 || len(body) < 4 {
		return 0, 0, protoErrorf("pushed op %#x, seq %d, status %d, %d-byte body; want completions", h.Op(), h.Seq(), h.Status(), len(body))
	}
	if n, err = ParseWCs(body[4:], wcs); err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, protoErrorf("pushed completions: none")
	}
	return ne.Uint32(body), n, nil
}

// DestroyCQ destroys a CQ; one a QP still uses is EBUSY (ErrDevice).
func (d *Device) DestroyCQ(c CQ) error {
	return d.callEmpty(ne.AppendUint32(AppendHeader(nil, OpDestroyCQ, 0, 0, 4), c.Handle))
}

// callEmpty makes a call whose reply has no body: one with a body broke
// the protocol.
func (d *Device) callEmpty(req []byte) error {
	body, err := d.h.Call(req)
	if err == nil && len(body) != 0 {
		err = d.failed(protoErrorf("a %d-byte reply to op %d, which has none", len(body), Header(req).Op()))
	}
	return err
}

// CreateQP makes an RC QP on the device whose send and receive
// completions go to send and recv. More work requests or SGEs than the
// device has (its max_qp_wr, max_sge) are refused saying so; what else the
// device cannot give is rdma-core's error (both ErrDevice).
func (d *Device) CreateQP(send, recv CQ, c QPCap) (QP, error) {
	if err := d.checkCap(c); err != nil {
		return QP{}, err
	}
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

// checkCap refuses more work requests or SGEs than the device has.
func (d *Device) checkCap(c QPCap) error {
	a := d.Attr
	switch {
	case int64(c.MaxSendWR) > int64(a.MaxQPWR) || int64(c.MaxRecvWR) > int64(a.MaxQPWR):
		return &Error{Kind: ErrDevice, Errno: int32(unix.EINVAL), Msg: fmt.Sprintf("%s takes at most %d work requests a queue (max_qp_wr); asked %d send, %d receive", d.Name, a.MaxQPWR, c.MaxSendWR, c.MaxRecvWR)}
	case int64(c.MaxSendSGE) > int64(a.MaxSGE) || int64(c.MaxRecvSGE) > int64(a.MaxSGE):
		return &Error{Kind: ErrDevice, Errno: int32(unix.EINVAL), Msg: fmt.Sprintf("%s takes at most %d SGEs a work request (max_sge); asked %d send, %d receive", d.Name, a.MaxSGE, c.MaxSendSGE, c.MaxRecvSGE)}
	}
	return nil
}

// ModifyQP moves qp to a.State with the attributes that transition takes
// (QPAttr).
func (d *Device) ModifyQP(qp QP, a QPAttr) error {
	return d.callEmpty(AppendModifyQP(nil, qp, a))
}

// DestroyQP destroys a QP.
func (d *Device) DestroyQP(qp QP) error {
	return d.callEmpty(ne.AppendUint32(AppendHeader(nil, OpDestroyQP, 0, 0, 4), qp.Handle))
}

// PostSend posts wrs to qp's send queue as one batch: one message to the
// helper and one ibv_post_send. A work request the helper refuses (an SGE
// outside its region, an unknown opcode) fails the batch and posts none;
// one the device refuses is rdma-core's errno naming the work request. An
// atomic on a device without atomics is refused here (ErrDevice,
// EOPNOTSUPP).
func (d *Device) PostSend(qp QP, wrs []SendWR) error {
	if d.Attr.AtomicCap == 0 {
		for i := range wrs {
			if op := wrs[i].Opcode; op == WRAtomicCmpAndSwp || op == WRAtomicFetchAdd {
				return &Error{Kind: ErrDevice, Errno: int32(unix.EOPNOTSUPP), Msg: fmt.Sprintf("%s has no atomics (atomic_cap 0: iWARP, siw): work request %d is one", d.Name, i)}
			}
		}
	}
	d.dp.mu.Lock()
	defer d.dp.mu.Unlock()
	req, err := AppendPostSend(d.dp.buf[:0], qp, wrs)
	if err != nil {
		return err
	}
	d.dp.buf = req
	return d.callEmpty(req)
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
	return d.callEmpty(req)
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

// SetCompletionHandler sets the function that gets the completions the
// helper pushes for CQs made with push: the CQ's handle and its
// completions, in the device's order. It runs on the push socket's reader
// goroutine: it must not call the device (the helper may be waiting to push
// more) and must not keep wcs, which the next push reuses.
func (d *Device) SetCompletionHandler(fn func(cq uint32, wcs []WC)) {
	d.dp.handler.Store(&fn)
}
