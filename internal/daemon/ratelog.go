package daemon

import (
	"log/slog"
	"sync"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
)

// warnInterval is how often one kind of trouble is logged at most: a
// client hammering at a limit must not fill the log.
const warnInterval = time.Minute

// warnLimiter holds one log limit per kind of trouble.
type warnLimiter struct {
	log    *slog.Logger
	mu     sync.Mutex
	limits map[string]*admit.LogLimit
}

// every logs msg at warning level unless the same kind of trouble
// (key) was logged less than warnInterval ago; the next line says how many
// were left out ("suppressed").
func (w *warnLimiter) every(key, msg string, args ...any) {
	w.mu.Lock()
	if w.limits == nil {
		w.limits = map[string]*admit.LogLimit{}
	}
	l := w.limits[key]
	if l == nil {
		l = &admit.LogLimit{Interval: warnInterval, Burst: 1}
		w.limits[key] = l
	}
	w.mu.Unlock()
	l.Log(w.log, slog.LevelWarn, msg, args...)
}
