package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// EventFD is a doorbell: Signal adds one, Wait blocks until the count is
// non-zero and clears it. It is non-blocking underneath so that waits go
// through the Go runtime's poller and can be cancelled.
type EventFD struct {
	f   *os.File
	raw syscall.RawConn // holds a reference on the descriptor while Signal writes
	buf [8]byte
}

// one is the 8-byte counter increment Signal writes.
var one = func() (b [8]byte) { binary.NativeEndian.PutUint64(b[:], 1); return }()

// signal writes one to fd. EAGAIN means the counter is saturated: a wake-up
// is pending anyway.
func signal(fd uintptr) bool {
	_, _ = unix.Write(int(fd), one[:])
	return true
}

func newEventFD(f *os.File) (*EventFD, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: eventfd: %w", err)
	}
	return &EventFD{f: f, raw: raw}, nil
}

// NewEventFD creates a fresh eventfd.
func NewEventFD() (*EventFD, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("shm: eventfd: %w", err)
	}
	return newEventFD(os.NewFile(uintptr(fd), "eventfd"))
}

// EventFDFrom adopts a received eventfd descriptor.
func EventFDFrom(fd int) (*EventFD, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: eventfd: %w", err)
	}
	return newEventFD(os.NewFile(uintptr(fd), "eventfd"))
}

// FD returns the descriptor, to pass to a peer.
func (e *EventFD) FD() int { return int(e.f.Fd()) }

// Signal adds one to the counter, waking a waiter. It never blocks, and it
// is safe to call concurrently with Close: once the descriptor is closed it
// does nothing (rather than write to a closed, or reused, descriptor number).
func (e *EventFD) Signal() {
	_ = e.raw.Write(signal)
}

// Wait blocks until the counter is non-zero or ctx ends, and clears it.
// One goroutine at a time may wait on an EventFD.
func (e *EventFD) Wait(ctx context.Context) error {
	if ctx.Done() != nil {
		// A deadline is set before the read; a cancellation arrives through
		// AfterFunc, which runs on its own goroutine, so before the deadline
		// is cleared for the next Wait that goroutine must have finished:
		// otherwise it could set its past deadline after the clearing, and
		// the next Wait would fail at once.
		if dl, ok := ctx.Deadline(); ok {
			_ = e.f.SetReadDeadline(dl)
		}
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			_ = e.f.SetReadDeadline(time.Unix(1, 0))
			close(fired)
		})
		defer func() {
			if !stop() {
				<-fired
			}
			_ = e.f.SetReadDeadline(time.Time{})
		}()
	}
	_, err := e.f.Read(e.buf[:])
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if _, ok := ctx.Deadline(); ok {
				return context.DeadlineExceeded // the deadline passed a moment before ctx noticed
			}
		}
		return err
	}
	return nil
}

// Close closes the descriptor; a blocked Wait returns an error.
func (e *EventFD) Close() error { return e.f.Close() }
