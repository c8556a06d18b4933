package shm

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// MemlockError reports memory that could not be locked in RAM because the
// process's RLIMIT_MEMLOCK is too small.
type MemlockError struct {
	Asked int    // bytes this lock asked for
	Limit uint64 // the soft RLIMIT_MEMLOCK in bytes (unix.RLIM_INFINITY: unlimited)
	Err   error  // the system call's error
}

func newMemlockError(asked int, err error) *MemlockError {
	var rl unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl)
	return &MemlockError{Asked: asked, Limit: rl.Cur, Err: err}
}

func (e *MemlockError) Error() string {
	limit := "unlimited"
	if e.Limit != unix.RLIM_INFINITY {
		limit = fmt.Sprintf("%d bytes (%d KiB)", e.Limit, e.Limit/1024)
	}
	return fmt.Sprintf("cannot lock %d bytes (%d KiB) of memory in RAM: RLIMIT_MEMLOCK is %s and "+
		"memory already locked counts against it (%v); raise it with `ulimit -l unlimited` in the "+
		"shell that starts the program, or for good with lines like `@rdma soft memlock unlimited` "+
		"and `@rdma hard memlock unlimited` in /etc/security/limits.conf (LimitMEMLOCK=infinity for systemd units)",
		e.Asked, e.Asked/1024, limit, e.Err)
}

func (e *MemlockError) Unwrap() error { return e.Err }
