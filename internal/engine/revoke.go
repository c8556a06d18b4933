package engine

import (
	"runtime"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
)

// Revoking an initiator's direct-path mappings. The library runs a direct
// operation between two words of the QP's shared region:
//
//	library                          daemon (Deregister)
//	busy = 1                         region unreachable (no MapMR)
//	if revoke != seen: unmap, stop   revoke++
//	... copy through the mapping ... wait until busy == 0
//	busy = 0
//
// All four accesses are sequentially consistent (Go's atomics), so either
// the library reads the new revoke word and touches nothing, or its busy
// store comes before the daemon's read of it and the daemon waits for the
// operation to end. docs/design/trusted-direct-path.md has the reasoning.

// RevokeDirect tells q's library that its direct-path mappings are stale
// and waits, at most bound, until no direct operation that may use one is
// running. It reports false if the wait ran out: the busy word is the
// client's, and a stuck or hostile one must not hold the caller for ever.
// A QP released meanwhile (its process gone) has nothing running.
func (q *QP) RevokeDirect(bound time.Duration) bool {
	q.memMu.Lock()
	if q.mem == nil {
		q.memMu.Unlock()
		return true
	}
	q.revokeGen++
	shm.Store32(q.mem, abi.QPRevokeOff, q.revokeGen)
	q.memMu.Unlock()
	deadline := time.Now().Add(bound)
	for i := 0; ; i++ {
		if !q.directBusy() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		if i < 100 {
			runtime.Gosched() // an operation takes microseconds
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// directBusy reads the library's busy word; false once q is released.
func (q *QP) directBusy() bool {
	q.memMu.Lock()
	defer q.memMu.Unlock()
	return q.mem != nil && shm.Load32(q.mem, abi.QPDirectBusyOff) != 0
}

// released reports whether q's shared region is gone.
func (q *QP) released() bool {
	q.memMu.Lock()
	defer q.memMu.Unlock()
	return q.mem == nil
}
