package verbs

import (
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// deviceCM is the device's connection manager as the daemon sees it: the
// socket the helper pushes rdma_cm events on, read by a goroutine of its
// own (as completions are, datapath.go).
type deviceCM struct {
	mu     sync.Mutex // guards events
	events *net.UnixConn
}

// CMOpen opens the device's connection manager: the helper loads the
// host's librdmacm.so.1 and makes an rdma_cm event channel. Each event of
// the helper's ids goes to handler, in order, on a goroutine of the CM's
// own; handler must not call the device's CM and wait for its own events.
// Without librdmacm it is an *Error of kind ErrDevice (ELIBACC) saying
// what to install; the rest of the device works as before. Calling it
// again does nothing.
func (d *Device) CMOpen(handler func(CMEvent)) error {
	d.cm.mu.Lock()
	defer d.cm.mu.Unlock()
	if d.cm.events != nil {
		return nil
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &Error{Kind: ErrDevice, Msg: "the CM's event socket: " + err.Error()}
	}
	err = d.callEmptyFD(AppendHeader(nil, OpCMOpen, 0, 0, 0), fds[1])
	unix.Close(fds[1])
	if err != nil {
		unix.Close(fds[0])
		return err
	}
	f := os.NewFile(uintptr(fds[0]), "verbs-helper-cm")
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return d.failed(&Error{Kind: ErrHelperGone, Msg: "the CM's event socket: " + err.Error()})
	}
	d.cm.events = fc.(*net.UnixConn)
	go d.readCMEvents(d.cm.events, handler)
	return nil
}

// readCMEvents reads the helper's CM events until the socket closes; one
// that breaks the protocol fails the helper.
func (d *Device) readCMEvents(c *net.UnixConn, handler func(CMEvent)) {
	defer c.Close()
	buf := make([]byte, MaxMessage+1)
	for {
		n, _, flags, _, err := c.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			return
		}
		if flags&unix.MSG_TRUNC != 0 {
			d.failed(protoErrorf("a pushed message over %d bytes", MaxMessage))
			return
		}
		ev, err := parseCMPush(buf[:n]) // cm_ud_msg.go
		if err != nil {
			c.Close()
			d.failed(err)
			return
		}
		handler(ev)
	}
}

func (d *Device) callEmptyFD(req []byte, fd int) error {
	body, err := d.h.CallFD(req, fd)
	if err == nil && len(body) != 0 {
		err = d.failed(protoErrorf("a %d-byte reply to op %d, which has none", len(body), Header(req).Op()))
	}
	return err
}

// CMListen listens on a (port 0: the kernel picks one; address all zero:
// any of the device's) with the device's CM and returns the listener's id
// and port. An address of another device's is ErrDevice, EXDEV.
func (d *Device) CMListen(a CMAddr, backlog uint32) (id uint32, port uint16, err error) {
	body, err := d.h.Call(AppendCMListen(nil, backlog, a))
	if err != nil {
		return 0, 0, err
	}
	if id, port, err = ParseCMID(body, true); err != nil {
		return 0, 0, d.failed(err)
	}
	return id, port, nil
}

// CMConnect starts dialling p.Dst for the device QP p.QPN: the helper
// resolves the address and the route and sends the REQ. The events say
// how it went: CMConnectResponse (move the QP with CMQPAttr, then
// CMEstablish), CMRejected, CMUnreachable, or the error of the step that
// failed (CMAddrError with -EXDEV: the address is not reached through
// this device).
func (d *Device) CMConnect(p CMConnectParam) (uint32, error) {
	if len(p.PrivateData) > MaxCMPrivateData {
		return 0, &Error{Kind: ErrDevice, Errno: int32(unix.EINVAL), Msg: "private data over 256 bytes"}
	}
	body, err := d.h.Call(AppendCMConnect(nil, p))
	if err != nil {
		return 0, err
	}
	id, _, err := ParseCMID(body, false)
	if err != nil {
		return 0, d.failed(err)
	}
	return id, nil
}

// CMAccept answers a connection request on id with the REP naming the
// device QP qpn, which must be in RTR (CMQPAttr) already.
func (d *Device) CMAccept(id, qpn uint32, responderResources, initiatorDepth, rnrRetry uint8, pdata []byte) error {
	if len(pdata) > MaxCMPrivateData {
		return &Error{Kind: ErrDevice, Errno: int32(unix.EINVAL), Msg: "private data over 256 bytes"}
	}
	return d.callEmpty(AppendCMAccept(nil, id, qpn, responderResources, initiatorDepth, rnrRetry, pdata))
}

// CMReject rejects a connection request (or a reply) on id with pdata.
func (d *Device) CMReject(id uint32, pdata []byte) error {
	if len(pdata) > MaxCMPrivateData {
		return &Error{Kind: ErrDevice, Errno: int32(unix.EINVAL), Msg: "private data over 256 bytes"}
	}
	return d.callEmpty(AppendCMReject(nil, id, pdata))
}

// CMEstablish sends the RTU of a dialled connection whose QP is in RTS.
func (d *Device) CMEstablish(id uint32) error { return d.callEmpty(AppendCMID(nil, OpCMEstablish, id)) }

// CMDisconnect sends the DREQ (or answers the peer's).
func (d *Device) CMDisconnect(id uint32) error {
	return d.callEmpty(AppendCMID(nil, OpCMDisconnect, id))
}

// CMDestroy destroys id (a listener's pending requests are rejected).
func (d *Device) CMDestroy(id uint32) error { return d.callEmpty(AppendCMID(nil, OpCMDestroy, id)) }

// CMQPAttr returns the attributes rdma_init_qp_attr gives id's QP for
// state (QPStateInit, QPStateRTR or QPStateRTS): what ModifyQP applies to
// the device QP the connection names.
func (d *Device) CMQPAttr(id, state uint32) (QPAttr, error) {
	body, err := d.h.Call(AppendCMQPAttr(nil, id, state))
	if err != nil {
		return QPAttr{}, err
	}
	a, _, err := ParseCMQPAttr(body, state)
	if err != nil {
		return QPAttr{}, d.failed(err)
	}
	return a, nil
}
