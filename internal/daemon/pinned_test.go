package daemon

import "testing"

// TestPinLedgerPerProcess: a process's sessions share one count, bounded by
// the limit given; other processes have their own; the count goes with the
// process's last session, and never wraps.
func TestPinLedgerPerProcess(t *testing.T) {
	l := newPinLedger()
	a1, a2, b := l.join(100), l.join(100), l.join(200)
	if a1 != a2 || a1 == b {
		t.Fatal("sessions of one process do not share a count, or two processes do")
	}
	if _, ok := l.pin(a1, 48<<10, 64<<10); !ok {
		t.Fatal("48 KiB under 64 KiB refused")
	}
	if total, ok := l.pin(a2, 48<<10, 64<<10); ok || total != 96<<10 {
		t.Fatalf("a second session's 48 KiB: total %d, ok %v; want a refusal at 96 KiB", total, ok)
	}
	if _, ok := l.pin(b, 48<<10, 64<<10); !ok {
		t.Fatal("another process's 48 KiB refused")
	}
	if _, ok := l.pin(a2, Unlimited, Unlimited); ok {
		t.Fatal("a charge that wraps the count passed")
	}
	l.unpin(a1, 1<<30) // more than held: stops at zero
	if got := l.pinned(a2); got != 0 {
		t.Fatalf("after giving everything back: %d", got)
	}
	l.leave(a1)
	if l.procs[100] == nil {
		t.Fatal("the count went with the first of two sessions")
	}
	l.leave(a2)
	l.leave(b)
	if len(l.procs) != 0 {
		t.Fatalf("counts outlive their sessions: %v", l.procs)
	}
}
