package perf

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestWindowWaitsForTheFirstMessage: a window whose time passes before
// anything was counted ends at the first message, not with a rate of 0
// (cmd/vrdma's TestPerfJSONLines saw rc_bi_bw report 0 messages in 0.1 s
// on a loaded machine).
func TestWindowWaitsForTheFirstMessage(t *testing.T) {
	var got atomic.Uint64
	release := make(chan struct{})
	go func() {
		<-release
		got.Store(5)
	}()
	start := time.Now()
	time.AfterFunc(20*time.Millisecond, func() { close(release) })
	tl := window(context.Background(), start, time.Millisecond, nil, &got, 64, true)
	if tl.Ops != 5 || tl.Bytes != 5*64 {
		t.Fatalf("window counted %d messages, %d bytes; want the 5 that came after its time", tl.Ops, tl.Bytes)
	}
}

// TestWindowEndsWithoutMessagesWhenStopped: the other end's being done, or
// the context, still ends a window that counted nothing.
func TestWindowEndsWithoutMessagesWhenStopped(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(stop chan struct{}, cancel context.CancelFunc)
	}{
		{"stop", func(stop chan struct{}, _ context.CancelFunc) { close(stop) }},
		{"context", func(_ chan struct{}, cancel context.CancelFunc) { cancel() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got atomic.Uint64
			stop := make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(10*time.Millisecond, func() { tt.end(stop, cancel) })
			done := make(chan tally, 1)
			go func() { done <- window(ctx, time.Now(), time.Millisecond, stop, &got, 64, true) }()
			select {
			case tl := <-done:
				if tl.Ops != 0 {
					t.Fatalf("window counted %d messages, want 0", tl.Ops)
				}
			case <-time.After(30 * time.Second): // a hang guard
				t.Fatal("window did not end when stopped")
			}
		})
	}
}

// TestWindowOfAnEndThatCountsNothing: rc_bw's active end counts nothing
// (its peer counts what arrives), so its window ends on its timer.
func TestWindowOfAnEndThatCountsNothing(t *testing.T) {
	var got atomic.Uint64
	done := make(chan tally, 1)
	go func() { done <- window(context.Background(), time.Now(), time.Millisecond, nil, &got, 64, false) }()
	select {
	case tl := <-done:
		if tl.Ops != 0 {
			t.Fatalf("window counted %d messages, want 0", tl.Ops)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the window of an end that counts nothing did not end on its timer")
	}
}
