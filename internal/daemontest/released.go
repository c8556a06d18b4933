package daemontest

import (
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// AwaitReleased waits, up to limit (a hang guard), until stats returns
// what it returned before something ran — a daemon frees a closed
// session's objects after the close returns — and the process has no more
// goroutines than it had then; the test fails otherwise, with the
// goroutines' stacks.
func AwaitReleased[S comparable](t testing.TB, stats func() (S, error), before S, goroutines int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st, err := stats()
		if err != nil {
			t.Fatal(err)
		}
		if st == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon holds %+v; before, %+v", st, before)
		}
		time.Sleep(time.Millisecond)
	}
	for runtime.NumGoroutine() > goroutines {
		if time.Now().After(deadline) {
			DumpGoroutines(t)
			t.Fatalf("%d goroutines; before, %d", runtime.NumGoroutine(), goroutines)
		}
		time.Sleep(time.Millisecond)
	}
}

// DumpGoroutines logs every goroutine's stack.
func DumpGoroutines(tb testing.TB) {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	tb.Log(b.String())
}

// AwaitSessions waits until sessions reports n: a rig that holds n sessions
// takes its tests' baselines only then, for the daemon may still be ending a
// session the rig's setup used (a device list, a recording client), and a
// baseline that counted it would never be met again.
func AwaitSessions(t testing.TB, sessions func() (int, error), n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got, err := sessions()
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon holds %d sessions; the rig has %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}
