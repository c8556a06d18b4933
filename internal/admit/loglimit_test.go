package admit

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

type recorder struct {
	mu    sync.Mutex
	lines []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.lines = append(r.lines, rec)
	r.mu.Unlock()
	return nil
}

// A flood logs Burst lines, counts the rest, and the first line after a
// new interval begins says how many were suppressed.
func TestLogLimit(t *testing.T) {
	var rec recorder
	log := slog.New(&rec)
	lim := &LogLimit{Interval: time.Hour, Burst: 3}
	for range 1000 {
		lim.Log(log, slog.LevelWarn, "refused")
	}
	if len(rec.lines) != 3 || lim.Suppressed() != 997 {
		t.Fatalf("%d lines logged, %d suppressed; want 3 and 997", len(rec.lines), lim.Suppressed())
	}
	lim.Reset() // the interval is over
	lim.Log(log, slog.LevelWarn, "refused")
	var said uint64
	rec.lines[3].Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			said = a.Value.Uint64()
		}
		return true
	})
	if len(rec.lines) != 4 || said != 997 {
		t.Fatalf("%d lines, the last says %d suppressed; want 4 and 997", len(rec.lines), said)
	}
}
