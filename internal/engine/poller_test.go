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
