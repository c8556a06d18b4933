package fabric

import (
	"context"
	"testing"
	"time"
)

// Rerun the numbers in docs/design/control-plane.md with
//
//	go test ./internal/fabric -run '^$' -bench . -benchtime 5x

// BenchmarkEmbeddedStart: a new single-node etcd, from nothing to serving.
func BenchmarkEmbeddedStart(b *testing.B) {
	for b.Loop() {
		m, err := StartEmbedded(b.TempDir(), EmbedOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		m.Close()
		b.StartTimer()
	}
}

// BenchmarkEmbeddedRestart: a daemon restarting on its existing state.
func BenchmarkEmbeddedRestart(b *testing.B) {
	dir := b.TempDir()
	m, err := StartEmbedded(dir, EmbedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	m.Close()
	for b.Loop() {
		m, err := StartEmbedded(dir, EmbedOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		m.Close()
		b.StartTimer()
	}
}

// benchTakeover measures the time from the leader's end (kill) to the
// standby's first report as leader, on a real embedded etcd.
func benchTakeover(b *testing.B, kill func(Session)) {
	m, err := StartEmbedded(b.TempDir(), EmbedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	st1, err := m.Dial()
	if err != nil {
		b.Fatal(err)
	}
	defer st1.Close()
	st2, err := m.Dial()
	if err != nil {
		b.Fatal(err)
	}
	defer st2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f1, _ := New(st1, "sw0")
	f2, _ := New(st2, "sw0")
	for b.Loop() {
		b.StopTimer()
		s1, _ := st1.NewSession(ctx, MinTTL)
		s2, _ := st2.NewSession(ctx, MinTTL)
		c1, err := f1.Campaign(ctx, s1, "a", 9, SMConfig{})
		if err != nil {
			b.Fatal(err)
		}
		c2, err := f2.Campaign(ctx, s2, "b", 1, SMConfig{})
		if err != nil {
			b.Fatal(err)
		}
		for c1.Role() != Leader {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		kill(s1)
		for rc := range c2.Changes() {
			if rc.Role == Leader {
				break
			}
		}
		b.StopTimer()
		c2.Close()
		c1.Close()
		s2.Close()
		s1.Close()
		b.StartTimer()
	}
}

// BenchmarkTakeoverExpire: the leader's daemon dies (keepalive stops);
// dominated by the lease TTL (MinTTL, 2 s).
func BenchmarkTakeoverExpire(b *testing.B) { benchTakeover(b, func(s Session) { s.Orphan() }) }

// BenchmarkTakeoverRevoke: the leader's daemon stops cleanly (revokes).
func BenchmarkTakeoverRevoke(b *testing.B) { benchTakeover(b, func(s Session) { _ = s.Close() }) }
