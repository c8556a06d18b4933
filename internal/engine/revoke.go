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
	if !q.bumpRevoke() {
		return true
	}
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

// bumpRevoke publishes a new revoke generation in q's shared region; false
// once q is released.
func (q *QP) bumpRevoke() bool {
	q.memMu.Lock()
	defer q.memMu.Unlock()
	if q.mem == nil {
		return false
	}
	q.revokeGen++
	shm.Store32(q.mem, abi.QPRevokeOff, q.revokeGen)
	return true
}

// revokePeers revokes the direct-path mappings of the initiators connected
// to q (Host.PeersOf): q was destroyed, stopped receiving or changed what it
// grants, after they mapped its regions under what it was. The caller has
// made the change visible first (no lookup finds q, or its new state or
// attributes are stored), so a mapping handed out from now on is refused or
// carries the new grant, and one handed out before is caught by the
// library's second read of the revoke word. Nothing waits: the regions are
// still registered, and an operation that read the old generation is one
// already under way when q changed, as a packet in flight would be. Their
// next request goes to the daemon, which completes it as it would for any
// initiator (RETRY_EXC_ERR from a QP that no longer answers,
// REM_INV_REQ_ERR from one that refuses the operation).
func (q *QP) revokePeers() {
	if q.typ != abi.QPTypeRC {
		return // the direct path is RC's alone
	}
	h := q.adapter.host
	if h == nil {
		return
	}
	for _, p := range h.PeersOf(q) {
		p.bumpRevoke()
	}
}

// receiving reports whether a QP in state s answers its peer's requests.
func receiving(s abi.QPState) bool {
	switch s {
	case abi.QPStateRTR, abi.QPStateRTS, abi.QPStateSQD, abi.QPStateSQE:
		return true
	}
	return false
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
