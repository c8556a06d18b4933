package admit

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a LogLimit.
const (
	DefaultLogInterval = 10 * time.Second
	DefaultLogBurst    = 20
)

// LogLimit lets at most Burst log lines through per Interval and counts
// the others, so that a flood of refused connections does not flood the
// log. The zero value uses the defaults; it is safe for concurrent use.
type LogLimit struct {
	Interval time.Duration // 0: DefaultLogInterval
	Burst    int           // 0: DefaultLogBurst

	mu         sync.Mutex
	start      time.Time
	n          int
	suppressed uint64 // since the last line let through
	total      atomic.Uint64
}

// Allow reports whether a line may be logged now and, if so, how many were
// suppressed since the last one that was.
func (r *LogLimit) Allow() (ok bool, suppressed uint64) {
	interval, burst := r.Interval, r.Burst
	if interval <= 0 {
		interval = DefaultLogInterval
	}
	if burst <= 0 {
		burst = DefaultLogBurst
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.start) >= interval {
		r.start, r.n = now, 0
	}
	if r.n >= burst {
		r.suppressed++
		r.total.Add(1)
		return false, 0
	}
	r.n++
	s := r.suppressed
	r.suppressed = 0
	return true, s
}

// Log logs msg with args at level through log, unless the limit is
// reached; a line that follows suppressed ones says how many with a
// "suppressed" attribute.
func (r *LogLimit) Log(log *slog.Logger, level slog.Level, msg string, args ...any) {
	ok, s := r.Allow()
	if !ok || !log.Enabled(context.Background(), level) {
		return
	}
	if s > 0 {
		args = append(args, "suppressed", s)
	}
	log.Log(context.Background(), level, msg, args...)
}

// Suppressed returns how many lines the limit has suppressed in all.
func (r *LogLimit) Suppressed() uint64 { return r.total.Load() }

// Reset starts a new interval at once, as if the last had ended.
func (r *LogLimit) Reset() {
	r.mu.Lock()
	r.start, r.n = time.Time{}, 0
	r.mu.Unlock()
}
