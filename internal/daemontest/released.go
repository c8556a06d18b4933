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
