package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Doorbell wakes a waiter in another process: Signal makes it ring, Wait
// blocks until it has rung and clears it. It is a pipe rather than an
// eventfd because of what sharing a descriptor shares. A descriptor passed
// with SCM_RIGHTS shares its open file description, O_NONBLOCK included:
// a client given the daemon's eventfd could make it blocking, so that the
// daemon's reads (or, with the counter near its maximum, its writes) block
// in the kernel for ever, and a client could read away a wake-up meant for
// the daemon. A pipe's ends can be reopened through /proc/self/fd as new
// open file descriptions: a peer gets its own (ShareReader, ShareWriter),
// with flags of its own, and only the end it needs.
type Doorbell struct {
	r, w *os.File // either may be nil
	rawR syscall.RawConn
	rawW syscall.RawConn
	buf  [64]byte
}

// NewDoorbell creates a doorbell holding both ends.
func NewDoorbell() (*Doorbell, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("shm: doorbell pipe: %w", err)
	}
	return adopt(p[0], p[1])
}

// DoorbellFrom adopts ends received from a peer; -1 for an end not given.
func DoorbellFrom(readFD, writeFD int) (*Doorbell, error) {
	if readFD < 0 && writeFD < 0 {
		return nil, errors.New("shm: doorbell without an end")
	}
	for _, fd := range []int{readFD, writeFD} {
		if fd >= 0 {
			if err := unix.SetNonblock(fd, true); err != nil {
				closeAll(readFD, writeFD)
				return nil, fmt.Errorf("shm: doorbell: %w", err)
			}
		}
	}
	return adopt(readFD, writeFD)
}

func closeAll(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

func adopt(readFD, writeFD int) (*Doorbell, error) {
	d := &Doorbell{}
	var err error
	if readFD >= 0 {
		d.r = os.NewFile(uintptr(readFD), "doorbell-r")
		if d.rawR, err = d.r.SyscallConn(); err != nil {
			d.r.Close()
			closeAll(writeFD)
			return nil, err
		}
	}
	if writeFD >= 0 {
		d.w = os.NewFile(uintptr(writeFD), "doorbell-w")
		if d.rawW, err = d.w.SyscallConn(); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// reopen returns a new open file description of raw's descriptor, for a
// peer; the caller passes it on and closes it.
func reopen(raw syscall.RawConn, flags int) (int, error) {
	if raw == nil {
		return -1, errors.New("shm: doorbell lacks that end")
	}
	fd, rerr := -1, error(nil)
	err := raw.Control(func(s uintptr) {
		fd, rerr = unix.Open(fmt.Sprintf("/proc/self/fd/%d", s), flags|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return -1, fmt.Errorf("shm: reopen doorbell end: %w", err)
	}
	return fd, nil
}

// ShareWriter returns a new descriptor of the write end, for a peer that
// rings this doorbell; the caller closes it once passed.
func (d *Doorbell) ShareWriter() (int, error) { return reopen(d.rawW, unix.O_WRONLY) }

// ShareReader returns a new descriptor of the read end, for a peer that
// waits on this doorbell; the caller closes it once passed.
func (d *Doorbell) ShareReader() (int, error) { return reopen(d.rawR, unix.O_RDONLY) }

// Signal rings the doorbell. It never blocks: a full pipe has rung already.
// After Close it does nothing.
func (d *Doorbell) Signal() {
	if d.rawW == nil {
		return
	}
	_ = d.rawW.Write(func(fd uintptr) bool {
		_, _ = unix.Write(int(fd), []byte{1})
		return true
	})
}

// Wait blocks until the doorbell has rung or ctx ends, and clears it. One
// goroutine at a time may wait.
func (d *Doorbell) Wait(ctx context.Context) error {
	if d.r == nil {
		return errors.New("shm: doorbell has no read end")
	}
	if ctx.Done() != nil {
		// A deadline is set before the read; a cancellation arrives through
		// AfterFunc, which runs on its own goroutine, so before the deadline
		// is cleared for the next Wait that goroutine must have finished:
		// otherwise it could set its past deadline after the clearing, and
		// the next Wait would fail at once.
		if dl, ok := ctx.Deadline(); ok {
			_ = d.r.SetReadDeadline(dl)
		}
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			_ = d.r.SetReadDeadline(time.Unix(1, 0))
			close(fired)
		})
		defer func() {
			if !stop() {
				<-fired
			}
			_ = d.r.SetReadDeadline(time.Time{})
		}()
	}
	_, err := d.r.Read(d.buf[:])
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

// WaitTimeout blocks until the doorbell has rung or d has passed, and
// clears it. It allocates nothing, unlike Wait with a context.
func (d *Doorbell) WaitTimeout(t time.Duration) error {
	if d.r == nil {
		return errors.New("shm: doorbell has no read end")
	}
	_ = d.r.SetReadDeadline(time.Now().Add(t))
	_, err := d.r.Read(d.buf[:])
	_ = d.r.SetReadDeadline(time.Time{})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

// Close closes both ends; a blocked Wait returns an error.
func (d *Doorbell) Close() error {
	var err error
	if d.r != nil {
		err = d.r.Close()
	}
	if d.w != nil {
		if werr := d.w.Close(); err == nil {
			err = werr
		}
	}
	return err
}
