package engine

// Faults of a device uplink (docs/design/verbs-uplink-faults.md): the
// device's asynchronous events become the instances' events, and a device
// that goes away (IBV_EVENT_DEVICE_FATAL: `rdma link delete`, the module
// unloaded; the helper dead or killed; the verbs link deleted) fails every
// QP on it: DEVICE_FATAL to each client, the QPs to ERR, and what they had
// posted to the device that had not completed flushed with
// IBV_WC_WR_FLUSH_ERR, so that no library call waits for a completion the
// device will never give.

import (
	"errors"
	"fmt"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/verbs"
)

// ErrUplinkDown is what an adapter whose verbs link went down refuses: new
// QPs and regions (errors.Is; the error names the link, why and the fix).
var ErrUplinkDown = errors.New("verbs link is down")

// UplinkDownError says which link is down and why.
type UplinkDownError struct {
	Link   string
	Dev    string // "" if unknown
	Reason error
}

func (e *UplinkDownError) Error() string {
	dev := e.Dev
	if dev == "" {
		dev = "IBDEV"
	}
	return fmt.Sprintf("verbs link %s is down (%v): its device is gone, and with it the QPs and regions on it; "+
		"re-add the link (`vrdma link del %s`, then `vrdma link add %s type verbs dev %s`) and open the device again (restart the application)",
		e.Link, e.Reason, e.Link, e.Link, dev)
}

// Is makes errors.Is(err, ErrUplinkDown) hold.
func (e *UplinkDownError) Is(target error) bool { return target == ErrUplinkDown }

// Unwrap gives the reason (verbs.ErrHelperGone, ...).
func (e *UplinkDownError) Unwrap() error { return e.Reason }

// Down returns why the uplink is down, nil while it is up.
func (u *DeviceUplink) Down() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.down == nil {
		return nil
	}
	return &UplinkDownError{Link: u.Name, Dev: u.Dev, Reason: u.down}
}

// SetDownHandler sets what is called, once, when the uplink goes down
// (the daemon marks its link DOWN with the reason).
func (u *DeviceUplink) SetDownHandler(fn func(reason error)) {
	u.mu.Lock()
	u.onDown = fn
	u.mu.Unlock()
}

// SetSuccessor names the uplink that replaces u, a link of the same name
// added again after u went down: an adapter bound to u moves to it when it
// next makes a QP or region and holds none on u any more.
func (u *DeviceUplink) SetSuccessor(n *DeviceUplink) {
	u.mu.Lock()
	u.next = n
	u.mu.Unlock()
}

// current returns the uplink a's new objects go on: its own while it is
// up; its successor once it is down, if a holds nothing on it; else an
// *UplinkDownError.
func (a *Adapter) current() (*DeviceUplink, error) {
	a.devMu.Lock()
	defer a.devMu.Unlock()
	for {
		u := a.uplink
		err := u.Down()
		if err == nil {
			return u, nil
		}
		u.mu.Lock()
		n := u.next
		u.mu.Unlock()
		if n == nil {
			return nil, err
		}
		if len(a.devMRs) > 0 || a.devQPs > 0 {
			return nil, fmt.Errorf("%w; adapter %s still holds %d QPs and %d regions of the device that went away: destroy them (close the device and open it again) to move to the link's new device", err, a.Name, a.devQPs, len(a.devMRs))
		}
		a.uplink = n
	}
}

// DeviceFatal takes the uplink down with reason: every client with QPs or
// CQs on it gets IBV_EVENT_DEVICE_FATAL, every QP goes to ERR and what it
// had posted to the device and not seen complete completes with
// IBV_WC_WR_FLUSH_ERR (requests still in the rings are flushed by the QP's
// runner, after them). The down handler runs before any of that, so that
// whoever is told finds the uplink down. Later calls do nothing.
func (u *DeviceUplink) DeviceFatal(reason error) {
	u.mu.Lock()
	if u.down != nil {
		u.mu.Unlock()
		return
	}
	u.down = reason
	qps := make([]*QP, 0, len(u.qps))
	for _, q := range u.qps {
		qps = append(qps, q)
	}
	sinks := map[EventSink]bool{}
	for c := range u.cqs {
		if c.Events != nil {
			sinks[c.Events] = true
		}
	}
	fn := u.onDown
	u.mu.Unlock()
	// The link's owner first (the daemon marks the link down with the
	// reason and the fix): a client told below may look at the link at
	// once, and must find it down.
	if fn != nil {
		fn(reason)
	}
	for _, q := range qps {
		if q.Events != nil {
			sinks[q.Events] = true
		}
		q.dev.flush()
	}
	u.flushSRQs()
	why := fmt.Sprintf("verbs link %s: %v", u.Name, reason)
	for s := range sinks {
		s.Event(abi.EventDeviceFatal, 0, 0, why)
	}
}

// flush moves d's QP to ERR as its device went away, completing what
// the device held with WR_FLUSH_ERR. Under procMu: the runner is not
// posting meanwhile, and what it flushes from the rings comes after.
func (d *devQP) flush() {
	q := d.q
	q.procMu.Lock()
	defer q.procMu.Unlock()
	d.flushLocked()
}

// flushLocked is flush with procMu held. What the device
// held is the QP's slot record (device_slots.go), flushed once.
func (d *devQP) flushLocked() {
	q := d.q
	q.devErr.Store(true) // nothing more goes to the device
	q.enterError()
	d.flushHeld()
}

// event maps one asynchronous event of the device to the instances':
//
//	QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR  the QP's, which goes to ERR (the device flushes it)
//	COMM_EST, SQ_DRAINED, QP_LAST_WQE    the QP's
//	CQ_ERR                               the CQ's
//	SRQ_LIMIT_REACHED, SRQ_ERR           the SRQ's (device_srq.go)
//	PORT_ACTIVE, PORT_ERR, GID_CHANGE    every client's with QPs or CQs on the device
//	DEVICE_FATAL                         DeviceFatal
//
// The rest (path migration, LID, P_Key and SM changes: none on RoCE) are
// dropped, as events of objects the engine does not have.
func (u *DeviceUplink) event(e verbs.AsyncEvent) {
	why := fmt.Sprintf("%s on verbs link %s", verbs.EventName(e.Type), u.Name)
	switch {
	case e.Type == verbs.EventDeviceFatal:
		u.DeviceFatal(fmt.Errorf("the device reported IBV_EVENT_DEVICE_FATAL (%s): it was removed (rdma link delete, module unload) or failed", verbs.EventName(e.Type)))
	case e.IsQPEvent():
		u.mu.Lock()
		q := u.qps[e.QPN]
		u.mu.Unlock()
		if q == nil || q.dev.qp.Handle != e.Element {
			return // destroyed meanwhile
		}
		t, ok := qpEvent(e.Type)
		switch {
		case !ok:
		case t == abi.EventQPFatal || t == abi.EventQPReqErr || t == abi.EventQPAccessErr:
			q.devErr.Store(true)
			q.Fail(t, why)
		case q.Events != nil:
			q.Events.Event(t, q.Handle, q.qpn, why)
		}
	case e.IsCQEvent():
		u.mu.Lock()
		d := u.byCQ[e.Element]
		u.mu.Unlock()
		if d != nil && d.ecq.Events != nil {
			d.ecq.Events.Event(abi.EventCQErr, d.ecq.Handle, 0, why)
		}
	case e.Type == verbs.EventSRQLimit || e.Type == verbs.EventSRQErr:
		// The helper names the SRQ by its handle (its srq_context).
		d := u.srqByHandle(e.Element)
		if d == nil {
			return // destroyed meanwhile
		}
		t := abi.EventSRQLimit
		if e.Type == verbs.EventSRQErr {
			t = abi.EventSRQErr
		}
		if r := d.rq; r.Events != nil {
			r.Events.Event(t, r.Handle, 0, why)
		}
	case e.Type == verbs.EventPortActive || e.Type == verbs.EventPortErr || e.Type == verbs.EventGIDChange:
		for s := range u.sinks() {
			s.Event(abi.EventType(e.Type), 0, 0, why)
		}
	}
}

// qpEvent is the instance's event type for a QP event of the device.
func qpEvent(t uint32) (abi.EventType, bool) {
	switch t {
	case verbs.EventQPFatal:
		return abi.EventQPFatal, true
	case verbs.EventQPReqErr:
		return abi.EventQPReqErr, true
	case verbs.EventQPAccessErr:
		return abi.EventQPAccessErr, true
	case verbs.EventCommEst:
		return abi.EventCommEst, true
	case verbs.EventSQDrained:
		return abi.EventSQDrained, true
	case verbs.EventQPLastWQE:
		return abi.EventQPLastWQE, true
	}
	return 0, false
}

// sinks returns the clients with QPs or CQs on the device.
func (u *DeviceUplink) sinks() map[EventSink]bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := map[EventSink]bool{}
	for c := range u.cqs {
		if c.Events != nil {
			s[c.Events] = true
		}
	}
	for _, q := range u.qps {
		if q.Events != nil {
			s[q.Events] = true
		}
	}
	return s
}

// deviceGone reports whether err, a failed request of the QP's runner to
// the device, says the helper is gone (exited, killed, or given up on);
// then the QP goes to ERR with nothing more for the device, and the uplink goes down
// (DeviceFatal, on its own goroutine: it waits for the runner's procMu,
// which the caller holds). The caller flushes what it was posting.
func (d *devQP) deviceGone(err error) bool {
	if !errors.Is(err, verbs.ErrHelperGone) && !errors.Is(err, verbs.ErrProtocol) && !errors.Is(err, verbs.ErrTimeout) {
		return false
	}
	d.flushLocked() // what the device held completes before the batch
	go d.u.DeviceFatal(err)
	return true
}
