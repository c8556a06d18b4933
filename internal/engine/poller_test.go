package engine

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestIdlePollerSleeps: once its adapters fall quiet, the host's poller
// must sleep, not spin: an async adapter with nothing to do costs no CPU.
func TestIdlePollerSleeps(t *testing.T) {
	h := NewHost()
	defer h.Close()
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, true)
	h.AddAdapter(a)
	defer h.RemoveAdapter(a)
	time.Sleep(2 * idleBeforeSleep) // the quiet spell after which it sleeps
	var before, after unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &before)
	time.Sleep(500 * time.Millisecond)
	_ = unix.Getrusage(unix.RUSAGE_SELF, &after)
	used := time.Duration(after.Utime.Nano()-before.Utime.Nano()) + time.Duration(after.Stime.Nano()-before.Stime.Nano())
	// A spinning poller uses about all of the 500 ms; a sleeping one wakes
	// every maxSleep for a moment. A quarter is far from both.
	if used > 125*time.Millisecond {
		t.Fatalf("an idle poller used %v of CPU in 500 ms", used)
	}
}

// TestIdlePollerDoesNotTick: an idle poller whose QPs have no timer
// sleeps until a doorbell rings, once, instead of waking every maxSleep
// (docs/design/idle-daemon.md); a doorbell still wakes it.
func TestIdlePollerDoesNotTick(t *testing.T) {
	h := NewHost()
	defer h.Close()
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, true)
	h.AddAdapter(a)
	defer h.RemoveAdapter(a)
	p := a.poller
	deadline := time.Now().Add(20 * time.Second) // a hang guard, not a bound
	for p.untimedSleeps.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle poller never went to sleep without a timer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	timed, untimed := p.timedSleeps.Load(), p.untimedSleeps.Load()
	time.Sleep(20 * maxSleep) // twenty of the old ticks
	if got := p.timedSleeps.Load(); got != timed {
		t.Errorf("the idle poller slept %d times on a timer no QP has", got-timed)
	}
	if got := p.untimedSleeps.Load(); got != untimed {
		t.Errorf("the idle poller woke %d times with no doorbell rung", got-untimed)
	}
	p.bell.Signal()
	for p.untimedSleeps.Load() == untimed {
		if time.Now().After(deadline) {
			t.Fatal("a doorbell did not wake the idle poller")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSleepFor: an idle poller sleeps until its QPs' first timer (a
// stalled request's or the transport's), at most maxSleep, and without a
// bound when none has one.
func TestSleepFor(t *testing.T) {
	const now = int64(1e12)
	qp := func(stall, wire time.Duration) *QP {
		q := &QP{}
		if stall != 0 {
			q.stallUntil.Store(now + int64(stall))
		}
		if wire != 0 {
			q.wireDeadline.Store(now + int64(wire))
		}
		return q
	}
	tests := []struct {
		name      string
		qps       []*QP
		wait      time.Duration
		wantTimed bool
	}{
		{"no QPs", nil, 0, false},
		{"QPs without timers", []*QP{qp(0, 0), qp(0, 0)}, 0, false},
		{"a stalled request", []*QP{qp(0, 0), qp(3*time.Millisecond, 0)}, 3 * time.Millisecond, true},
		{"the transport's timer", []*QP{qp(0, 2*time.Millisecond)}, 2 * time.Millisecond, true},
		{"the first of several", []*QP{qp(5*time.Millisecond, 4*time.Millisecond), qp(0, time.Millisecond)}, time.Millisecond, true},
		{"a timer far off: at most maxSleep", []*QP{qp(0, time.Second)}, maxSleep, true},
		{"a timer due already", []*QP{qp(-time.Millisecond, 0)}, time.Microsecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wait, timed := sleepFor(tt.qps, now)
			if wait != tt.wait || timed != tt.wantTimed {
				t.Errorf("sleepFor = %v, %v; want %v, %v", wait, timed, tt.wait, tt.wantTimed)
			}
		})
	}
}
