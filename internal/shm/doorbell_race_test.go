package shm

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDoorbellWaitAfterTimeoutStillWorks: a Wait whose context ends while a signal
// wakes it must leave the EventFD as it found it. The cancellation runs on
// its own goroutine; when it set its past read deadline after Wait had
// cleared it, the next plain Wait failed at once, and the daemon's QP
// worker, taking that for its end, stopped serving its QP.
func TestDoorbellWaitAfterTimeoutStillWorks(t *testing.T) {
	e, err := NewDoorbell()
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

// TestDoorbellPeerCannotAffectUs: a peer's descriptors are its own open
// file descriptions. Making its end blocking leaves ours non-blocking, and
// the peer's write end cannot be read from, so it cannot take wake-ups.
func TestDoorbellPeerCannotAffectUs(t *testing.T) {
	d, err := NewDoorbell()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w, err := d.ShareWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(w)
	r, err := d.ShareReader()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(r)
	for _, fd := range []int{w, r} {
		if err := unix.SetNonblock(fd, false); err != nil {
			t.Fatal(err)
		}
	}
	var b [8]byte
	if _, err := unix.Read(w, b[:]); err == nil {
		t.Fatal("the peer's write end could be read from")
	}
	// Ours are still non-blocking: a Wait with a deadline returns.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := d.Wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Wait on an unrung doorbell returned %v, want the deadline", err)
	}
	// The peer's ring reaches us.
	if _, err := unix.Write(w, []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestDoorbellCloseUnblocksWait(t *testing.T) {
	d, err := NewDoorbell()
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- d.Wait(context.Background()) }()
	time.Sleep(10 * time.Millisecond)
	d.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("Wait returned nil after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a blocked Wait")
	}
	d.Signal() // after Close: a no-op, not a write to a reused descriptor
}

func TestDoorbellFromNeedsAnEnd(t *testing.T) {
	if _, err := DoorbellFrom(-1, -1); err == nil {
		t.Fatal("DoorbellFrom(-1, -1) succeeded")
	}
}
