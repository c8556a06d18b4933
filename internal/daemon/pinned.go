package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// The kernel charges the memory ibv_reg_mr pins to the registering
// process, against that process's RLIMIT_MEMLOCK, however many device
// contexts it opened. The daemon, which locks the memory itself, does the
// same: it counts what it locks per client process across all that
// process's sessions, and the process is the one that sent the
// registration, as the kernel names it with the message (SCM_CREDENTIALS),
// not the one that connected: a process that forks passes its connection
// on, and its child is charged against its own limit, as the kernel would
// charge it. A process whose limit cannot be read (it has exited, or the
// daemon cannot see it) is refused, not assumed unlimited
// (docs/design/accounting.md).

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

// pin counts n more bytes locked for the process that sent the request
// being served, after checking that this stays within that process's own
// RLIMIT_MEMLOCK: a daemon that may lock anything must not pin memory on
// behalf of a client that may not. It returns the process's count, for
// unpin (nil for a root session's request from a process it cannot name).
// Root sessions (CAP_IPC_LOCK) are not limited; any other request from a
// process whose limit cannot be read is refused.
func (s *session) pin(n uint64) (*procPins, error) {
	pid := int32(0)
	if from := s.sender(); from.Known {
		pid = from.PID
	}
	limit := uint64(Unlimited)
	if s.cred.uid == 0 {
		if pid <= 0 && s.cred.known {
			pid = s.cred.pid
		}
		if pid <= 0 {
			s.pinned += n
			return nil, nil
		}
	} else {
		l, err := memlockOf(pid)
		if err != nil {
			return nil, proto.Errorf(proto.CodeMemlock, "%v: the daemon locks registered memory only within the registering process's RLIMIT_MEMLOCK, and refuses what it cannot check", err)
		}
		limit = l
	}
	p := s.d.pins.join(pid)
	if total, ok := s.d.pins.pin(p, n, limit); !ok {
		s.d.pins.leave(p)
		return nil, proto.Errorf(proto.CodeMemlock, "registering %d more bytes would lock %d bytes in all for this process (pid %d: all its regions, whichever connection registered them), above its RLIMIT_MEMLOCK of %d bytes: raise it with `ulimit -l` or limits.conf memlock lines", n, total, pid, limit)
	}
	s.pinned += n
	return p, nil
}

// unpin gives back n bytes pin counted for p.
func (s *session) unpin(p *procPins, n uint64) {
	n = min(n, s.pinned)
	s.pinned -= n
	if p != nil {
		s.d.pins.unpin(p, n)
		s.d.pins.leave(p)
	}
}

// memlockOf is memlockLimit; tests replace it.
var memlockOf = memlockLimit

// memlockLimit reads a process's soft RLIMIT_MEMLOCK, as it is now (it
// changes with prlimit, so it is read at every registration, never kept):
// with prlimit, one system call, where the daemon may (CAP_SYS_RESOURCE,
// or the same user), else from /proc/PID/limits, which needs neither but
// costs an open, a read of a page of text and a close. Unlimited when it
// is unlimited, an error when it cannot be read.
func memlockLimit(pid int32) (uint64, error) {
	if pid <= 0 {
		return 0, errors.New("the daemon cannot tell which process sent this registration (its pid is not visible in the daemon's pid namespace, or the connection passes no credentials), so it cannot read its RLIMIT_MEMLOCK: run the daemon in the clients' pid namespace or a parent of it")
	}
	var rl unix.Rlimit
	if unix.Prlimit(int(pid), unix.RLIMIT_MEMLOCK, nil, &rl) == nil {
		if rl.Cur == unix.RLIM_INFINITY {
			return Unlimited, nil
		}
		return rl.Cur, nil
	}
	return memlockFromProc(pid)
}

// memlockFromProc reads a process's soft RLIMIT_MEMLOCK from
// /proc/PID/limits.
func memlockFromProc(pid int32) (uint64, error) {
	path := fmt.Sprintf("/proc/%d/limits", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cannot read the RLIMIT_MEMLOCK of process %d (%v): has it exited while its request was served, or is /proc mounted with hidepid?", pid, err)
	}
	return parseMemlock(b, path)
}

// parseMemlock reads the soft limit from the "Max locked memory" line of
// a /proc/PID/limits file.
func parseMemlock(b []byte, path string) (uint64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) > 0 && f[0] == "unlimited" {
			return Unlimited, nil
		}
		if len(f) > 0 {
			if v, err := strconv.ParseUint(f[0], 10, 64); err == nil {
				return v, nil
			}
		}
		return 0, fmt.Errorf("%s has a \"Max locked memory\" line the daemon cannot read: %q", path, line)
	}
	return 0, fmt.Errorf("%s has no \"Max locked memory\" line", path)
}
