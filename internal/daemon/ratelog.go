package daemon

import (
	"sync"
	"time"
)

// warnInterval is how often one kind of trouble is logged at most: a
// client hammering at a limit must not fill the log.
const warnInterval = time.Minute

// warnLimiter remembers when each kind of trouble was last logged and how
// many times it was not logged since.
type warnLimiter struct {
	mu    sync.Mutex
	last  map[string]time.Time
	quiet map[string]int
}

// warnEvery logs msg at warning level unless the same key was logged less
// than warnInterval ago; the next line says how many were left out.
func (d *Daemon) warnEvery(key, msg string, args ...any) {
	w := &d.warns
	now := time.Now()
	w.mu.Lock()
	if w.last == nil {
		w.last, w.quiet = map[string]time.Time{}, map[string]int{}
	}
	if t, ok := w.last[key]; ok && now.Sub(t) < warnInterval {
		w.quiet[key]++
		w.mu.Unlock()
		return
	}
	n := w.quiet[key]
	w.last[key], w.quiet[key] = now, 0
	w.mu.Unlock()
	if n > 0 {
		args = append(args, "not_logged_since_last", n)
	}
	d.log.Warn(msg, args...)
}
