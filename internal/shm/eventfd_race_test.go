package shm

import (
	"context"
	"testing"
	"time"
)

// TestWaitAfterTimeoutStillWorks: a Wait whose context ends while a signal
// wakes it must leave the EventFD as it found it. The cancellation runs on
// its own goroutine; when it set its past read deadline after Wait had
// cleared it, the next plain Wait failed at once, and the daemon's QP
// worker, taking that for its end, stopped serving its QP.
func TestWaitAfterTimeoutStillWorks(t *testing.T) {
	e, err := NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := 0; i < 3000; i++ {
		d := time.Duration(i%20) * time.Microsecond
		ctx, cancel := context.WithTimeout(context.Background(), d)
		go func() { time.Sleep(d); e.Signal() }() // races the timeout
		_ = e.Wait(ctx)                           // either outcome is fine
		cancel()
		e.Signal()
		if err := e.Wait(context.Background()); err != nil {
			t.Fatalf("round %d: a signalled wait after a timed-out one failed: %v", i, err)
		}
	}
}
