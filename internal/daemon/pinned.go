package daemon

import (
	"sync"

	"github.com/vrdma/vrdma/internal/proto"
)

// The kernel charges the memory ibv_reg_mr pins to the registering
// process, against that process's RLIMIT_MEMLOCK, however many device
// contexts it opened. The daemon, which locks the memory itself, does the
// same: it counts what it locks per client process (the pid SO_PEERCRED
// gave at connect), across all that process's sessions.

// pinLedger counts the bytes the daemon locks for each client process.
type pinLedger struct {
	mu    sync.Mutex
	procs map[int32]*procPins
}

// procPins is what one client process has the daemon lock.
type procPins struct {
	pid    int32
	pinned uint64 // bytes, across the process's sessions (pinLedger.mu)
	refs   int    // sessions of the process
}

func newPinLedger() *pinLedger { return &pinLedger{procs: make(map[int32]*procPins)} }

// join returns pid's count, created if need be, and holds it until leave:
// one per session.
func (l *pinLedger) join(pid int32) *procPins {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.procs[pid]
	if p == nil {
		p = &procPins{pid: pid}
		l.procs[pid] = p
	}
	p.refs++
	return p
}

// leave lets go of a count join returned; the last session forgets it.
// A pid reused by another process while a session of the old one lives
// (its socket passed on) shares the old count: stricter, never looser.
func (l *pinLedger) leave(p *procPins) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.refs--; p.refs <= 0 && l.procs[p.pid] == p {
		delete(l.procs, p.pid)
	}
}

// pin adds n bytes to p if that keeps it within limit, and reports the
// total it would have come to either way.
func (l *pinLedger) pin(p *procPins, n, limit uint64) (total uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	total = p.pinned + n
	if total < n || total > limit {
		return total, false
	}
	p.pinned = total
	return total, true
}

// unpin gives back n bytes of p; the count stops at zero.
func (l *pinLedger) unpin(p *procPins, n uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p.pinned -= min(n, p.pinned)
}

// pinned returns what p has locked.
func (l *pinLedger) pinned(p *procPins) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return p.pinned
}

// pin counts n more bytes locked for the session's process, after checking
// that this stays within the process's own RLIMIT_MEMLOCK: a daemon that
// may lock anything must not pin memory on behalf of a client that may
// not. Root clients (CAP_IPC_LOCK), peers of unknown pid and processes
// without a limit are not limited. unpin gives the bytes back.
func (s *session) pin(n uint64) error {
	s.pinned += n
	if s.proc == nil {
		return nil
	}
	limit := uint64(Unlimited)
	if s.cred.uid != 0 {
		if l, ok := memlockLimit(int(s.cred.pid)); ok {
			limit = l
		}
	}
	if total, ok := s.d.pins.pin(s.proc, n, limit); !ok {
		s.pinned -= n
		return proto.Errorf(proto.CodeMemlock, "registering %d more bytes would lock %d bytes in all for this process (pid %d, all its sessions together), above its RLIMIT_MEMLOCK of %d bytes: raise it with `ulimit -l` or limits.conf memlock lines", n, total, s.proc.pid, limit)
	}
	return nil
}

func (s *session) unpin(n uint64) {
	n = min(n, s.pinned)
	s.pinned -= n
	if s.proc != nil {
		s.d.pins.unpin(s.proc, n)
	}
}
