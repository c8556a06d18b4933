package shm

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func testEventFD(t *testing.T) *EventFD {
	t.Helper()
	e, err := NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestEventFDSignalWait(t *testing.T) {
	e := testEventFD(t)
	e.Signal()
	if err := e.Wait(context.Background()); err != nil {
		t.Fatalf("Wait after Signal: %v", err)
	}
	// Signals coalesce: one Wait clears them all, and the next Wait blocks
	// (here: until its already-cancelled context ends it).
	e.Signal()
	e.Signal()
	e.Signal()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.Wait(ctx); err != nil {
		t.Fatalf("Wait after three Signals: %v", err)
	}
	if err := e.Wait(cancelled()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cleared counter = %v, want context.Canceled", err)
	}
	// A cancelled wait leaves the descriptor usable.
	e.Signal()
	if err := e.Wait(context.Background()); err != nil {
		t.Fatalf("Wait after a cancelled Wait: %v", err)
	}
}

func TestEventFDWaitWakesOnSignal(t *testing.T) {
	e := testEventFD(t)
	done := make(chan error, 1)
	go func() { done <- e.Wait(context.Background()) }()
	e.Signal()
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func TestEventFDWaitCancelled(t *testing.T) {
	e := testEventFD(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Wait(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	// The deadline the cancellation set does not outlive the Wait.
	e.Signal()
	if err := e.Wait(context.Background()); err != nil {
		t.Fatalf("Wait after a cancelled Wait: %v", err)
	}
}

func TestEventFDWaitDeadline(t *testing.T) {
	e := testEventFD(t)
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	if err := e.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want context.DeadlineExceeded", err)
	}
}

func TestEventFDCloseUnblocksWait(t *testing.T) {
	e, err := NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		done <- e.Wait(context.Background())
	}()
	<-started
	e.Close()
	if err := <-done; err == nil {
		t.Fatal("Wait on a closed eventfd returned nil")
	}
}

func TestEventFDFrom(t *testing.T) {
	// A peer's descriptor may arrive blocking; EventFDFrom makes it
	// non-blocking so that waits can be cancelled.
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	e, err := EventFDFrom(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.FD() < 0 {
		t.Fatalf("FD = %d", e.FD())
	}
	flags, err := unix.FcntlInt(uintptr(e.FD()), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK == 0 {
		t.Fatalf("flags %#x, %v: not non-blocking", flags, err)
	}
	if err := e.Wait(cancelled()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	// The two ends of a doorbell: one signals, the other waits.
	peer, err := unix.Dup(e.FD())
	if err != nil {
		t.Fatal(err)
	}
	p, err := EventFDFrom(peer)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Signal()
	if err := e.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestEventFDFromBad(t *testing.T) {
	if _, err := EventFDFrom(-1); err == nil {
		t.Fatal("EventFDFrom(-1) succeeded")
	}
}

func TestEventFDSignalAfterClose(t *testing.T) {
	e, err := NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	e.Signal() // must neither panic nor write to a reused descriptor number
	if err := e.Wait(context.Background()); err == nil {
		t.Fatal("Wait on a closed eventfd returned nil")
	}
}
