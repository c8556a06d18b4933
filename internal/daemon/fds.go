package daemon

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// Descriptors: the daemon holds some for every client object (fdCost), and
// running out would fail whatever needs one next, its own work included.
// So it raises RLIMIT_NOFILE as far as it may at start, keeps a reserve,
// and refuses a client object that would eat into the reserve.

// raiseFDLimit raises the soft RLIMIT_NOFILE to the hard one and, when the
// daemon may (CAP_SYS_RESOURCE), the hard one to the system's nr_open. It
// returns the soft limit in force.
func raiseFDLimit() uint64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > lim.Max {
			up := unix.Rlimit{Cur: n, Max: n}
			if unix.Setrlimit(unix.RLIMIT_NOFILE, &up) == nil {
				return n
			}
		}
	}
	if lim.Cur < lim.Max {
		up := unix.Rlimit{Cur: lim.Max, Max: lim.Max}
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &up) == nil {
			return lim.Max
		}
	}
	return lim.Cur
}

// fdReserve is how many descriptors the daemon keeps for itself under a
// limit of n: for its links, the switch, the connection manager, replies
// under way and the accept loop.
func fdReserve(n uint64) uint64 {
	return min(max(64, n/16), n/2)
}

// fdGuard admits new client descriptors while the daemon keeps its reserve.
// It counts the open descriptors (/proc/self/fd) at most every recount
// interval, or sooner near the limit, and estimates in between from what
// it admitted (what was closed since only makes the estimate high).
type fdGuard struct {
	limit, reserve uint64

	mu      sync.Mutex
	counted uint64    // open descriptors at the last count
	since   uint64    // admitted since
	at      time.Time // of the last count
	now     func() time.Time
	count   func() (uint64, error)
}

const (
	fdRecount     = time.Second           // the longest an estimate is trusted
	fdRecountNear = 20 * time.Millisecond // near the limit
)

func newFDGuard(limit uint64) *fdGuard {
	return &fdGuard{limit: limit, reserve: fdReserve(limit), now: time.Now, count: countFDs}
}

// budget is what clients may hold: the limit less the reserve.
func (g *fdGuard) budget() uint64 { return g.limit - g.reserve }

// admit says whether n more descriptors may be opened for a client, or
// why not (CodeLimit).
func (g *fdGuard) admit(n uint64) error {
	if n == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	near := g.counted+g.since+n+g.reserve/2 > g.budget()
	if age := now.Sub(g.at); age >= fdRecount || near && age >= fdRecountNear {
		if c, err := g.count(); err == nil {
			g.counted, g.since, g.at = c, 0, now
		}
	}
	if open := g.counted + g.since; open+n > g.budget() {
		return proto.Errorf(proto.CodeLimit, "the daemon holds %d descriptors and keeps %d of its limit of %d in reserve: no more for clients now; close devices or objects (other tenants' may be the ones holding them), or raise the daemon's RLIMIT_NOFILE (LimitNOFILE=)",
			open, g.reserve, g.limit)
	}
	g.since += n
	return nil
}

// countFDs counts this process's open descriptors: the size Linux (6.2
// and later) reports for /proc/self/fd, else by reading the directory.
func countFDs() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/fd", &st); err == nil && st.Size > 0 {
		return uint64(st.Size), nil
	}
	return listFDs()
}

// listFDs counts the entries of /proc/self/fd. The kernel walks the
// descriptor table from the start for every getdents, so the buffer is
// large: a table of 10,000 takes one call, not fifteen.
func listFDs() (uint64, error) {
	fd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 256<<10)
	var n uint64
	for {
		m, err := unix.Getdents(fd, buf)
		if err != nil {
			return 0, err
		}
		if m <= 0 {
			break
		}
		for off := 0; off < m; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:])) // struct linux_dirent64
			if reclen == 0 {
				break
			}
			if name := buf[off+19]; name != '.' {
				n++
			}
			off += reclen
		}
	}
	return n - min(n, 1), nil // less the directory's own descriptor
}

// outOfDescriptors reports whether err is the kernel saying this process
// or the system has no descriptor (or memory for one) left.
func outOfDescriptors(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.ENOBUFS)
}

// creationError gives the error of a failed object creation its code: out
// of descriptors or memory is CodeLimit, with what to do.
func (d *Daemon) creationError(what string, err error) error {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return err
	}
	if outOfDescriptors(err) {
		d.warns.every("resources", "the daemon ran out of descriptors or memory creating a client object", "object", what, "err", err)
		return proto.Errorf(proto.CodeLimit, "the daemon could not create the %s: %v: close objects or devices, or raise the daemon's RLIMIT_NOFILE (LimitNOFILE=)", what, err)
	}
	return proto.Errorf(proto.CodeInternal, "%s: %v", what, err)
}
