package vrdma

import (
	"errors"

	"github.com/vrdma/vrdma/internal/proto"
)

// A lost device. When the daemon goes away (its connection closes) or
// reports DEVICE_FATAL, nothing will execute a posted request, complete
// one or ring a doorbell again. As a hardware device that resets, the
// device then fails every verb with ErrDeviceFatal: posts at once, Poll
// once the completions still in the ring are taken, Wait at once, and
// waits already asleep are woken to say so.

// lostMsg is what every verb on a lost device says.
const lostMsg = "the vrdma daemon went away: the device is lost (DEVICE_FATAL) and its queues are dead; start the daemon again (vrdma daemon) and reopen the device"

// lostError is the loss as verb op reports it.
func lostError(op string) *Error { return &Error{Op: op, Kind: ErrDeviceFatal, Msg: lostMsg} }

// The data path's errors for a lost device, made once: they allocate
// nothing when returned.
var (
	errPostSendLost = &PostError{Err: lostError("post_send")}
	errPostRecvLost = &PostError{Err: lostError("post_recv")}
	errPollLost     = lostError("poll_cq")
	errWaitLost     = lostError("wait_cq")
)

// markLost records the loss and wakes every CQ's waiter, whose doorbell
// the daemon will never ring: each wakes, finds the device lost and
// returns. The flag is set before the doorbells ring, and a waiter reads
// it after it armed, so none can sleep through.
func (d *Device) markLost() {
	if d.lost.Swap(true) {
		return
	}
	d.mu.Lock()
	cqs := make([]*CQ, 0, len(d.cqs))
	for _, cq := range d.cqs {
		cqs = append(cqs, cq)
	}
	d.mu.Unlock()
	for _, cq := range cqs {
		cq.wake()
	}
}

// release asks the daemon to free the object handle names. On a lost
// device the daemon freed everything already, so it succeeds, and the
// caller frees its own side, as ibv_destroy_* do after DEVICE_FATAL: a
// program cleaning up after the loss sees no error for each object.
func (d *Device) release(op proto.Op, handle uint32) error {
	_, err := d.c.call(op, proto.HandleReq{Handle: handle}, nil)
	if errors.Is(err, ErrDeviceFatal) {
		return nil
	}
	return err
}
