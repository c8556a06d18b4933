package engine

import (
	"errors"
	"fmt"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
	"golang.org/x/sys/unix"
)

// ErrSRQClosed reports a change to an SRQ that is already closed.
var ErrSRQClosed = errors.New("the shared receive queue is closed")

// SRQLimitError reports an SRQ limit (ibv_modify_srq's srq_limit) above
// what the SRQ holds, or a resize below the armed limit, as rxe refuses
// both.
type SRQLimitError struct {
	Limit, MaxWR int
}

func (e *SRQLimitError) Error() string {
	return fmt.Sprintf("srq_limit %d above max_wr %d: arm a limit no larger than the SRQ, or disarm it (0) before shrinking the SRQ", e.Limit, e.MaxWR)
}

// SRQBelowPendingError reports a resize to fewer entries than the receive
// requests posted and not yet consumed.
type SRQBelowPendingError struct {
	MaxWR, Pending int
}

func (e *SRQBelowPendingError) Error() string {
	return fmt.Sprintf("max_wr %d: the SRQ holds %d posted receive requests: let them be consumed first or ask for at least that many", e.MaxWR, e.Pending)
}

// Limit returns the armed SRQ limit, 0 when none is (ibv_query_srq), and
// MaxWR the number of entries of its ring.
func (r *RQ) Limit() int {
	if d := r.dev; d != nil {
		// The device arms and disarms it (its limit event).
		if a, err := d.dev.QuerySRQ(d.srq); err == nil {
			return int(a.Limit)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limit
}
func (r *RQ) MaxWR() int { r.mu.Lock(); defer r.mu.Unlock(); return r.ring.Entries }

// MaxSGE returns the scatter entries of each of an RQ's requests.
func (r *RQ) MaxSGE() int { return r.maxSGE }

// SetLimit arms (limit > 0) or disarms (0) the SRQ limit event: once fewer
// receive requests than limit remain posted after one is consumed, the
// SRQ's Events get EventSRQLimit once and the limit is disarmed again.
func (r *RQ) SetLimit(limit int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return ErrSRQClosed
	}
	if limit < 0 || limit > r.ring.Entries {
		return &SRQLimitError{Limit: limit, MaxWR: r.ring.Entries}
	}
	if d := r.dev; d != nil {
		// The device's SRQ raises the event (through the helper's async
		// events, device_fault.go); the engine's stays disarmed.
		if err := d.dev.ModifySRQ(d.srq, verbs.SRQLimit, verbs.SRQAttr{Limit: uint32(limit)}); err != nil {
			return fmt.Errorf("arming the limit of the SRQ on %s: %w", d.u.Name, err)
		}
		return nil
	}
	r.limit = limit
	return nil
}

// limitReached, called with r.mu held after a request was consumed,
// disarms the limit and reports whether the event is due.
func (r *RQ) limitReached(prod uint32) bool {
	if r.limit == 0 || int(prod-r.cons) >= r.limit {
		return false
	}
	r.limit = 0
	return true
}

// raiseLimit sends the limit event; r.mu must not be held.
func (r *RQ) raiseLimit() {
	if r.Events != nil {
		r.Events.Event(abi.EventSRQLimit, r.Handle, 0, "fewer receive requests posted than the SRQ's limit: post more; the limit is disarmed until ibv_modify_srq arms it again")
	}
}

// Resize replaces an SRQ's ring by one of at least maxWR entries, as
// CQ.Resize does a CQ's: the requests between the daemon's consumer index
// and the producer index the library wrote are copied to the same indices
// of the new ring, whose header takes the old one's indices, so none is
// lost or taken twice. The library must not post meanwhile (its SRQ lock is
// held across the command). It returns the footprint the SRQ had, for the
// caller to give back, and a descriptor of the new ring's memfd for the
// client (the caller closes it once passed); on an error the SRQ keeps its
// ring and its limit. limit, unless negative, is armed with the resize
// (ibv_modify_srq with both attributes): the new size is judged against it
// rather than the one armed before.
func (r *RQ) Resize(maxWR, limit int) (old uint64, fd int, err error) {
	ring := srqRing(maxWR, r.maxSGE)
	region, err := shm.NewRegion("vrdma-srq", ring.Size())
	if err != nil {
		return 0, -1, err
	}
	if fd, err = unix.Dup(region.FD()); err != nil {
		region.Close()
		return 0, -1, err
	}
	fail := func(err error) (uint64, int, error) {
		unix.Close(fd)
		region.Close()
		return 0, -1, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil || r.region == nil {
		return fail(ErrSRQClosed)
	}
	if limit < 0 {
		limit = r.limit
	}
	if limit > maxWR {
		return fail(&SRQLimitError{Limit: limit, MaxWR: maxWR})
	}
	prod := shm.Load32(r.mem, r.ring.Offset+abi.RingProdOff) // the library's, untrusted
	n, err := r.ring.Pending(prod, r.cons)
	if err != nil {
		return fail(err)
	}
	// As rxe: the size asked for counts, before it is rounded up.
	if n > maxWR {
		return fail(&SRQBelowPendingError{MaxWR: maxWR, Pending: n})
	}
	old = r.footprintLocked()
	if d := r.dev; d != nil {
		// The device's SRQ first: a size it refuses leaves both as they were.
		mask, a := uint32(verbs.SRQMaxWR), verbs.SRQAttr{MaxWR: uint32(ring.Entries)}
		if limit > 0 {
			mask, a.Limit = mask|verbs.SRQLimit, uint32(limit)
		}
		if err := d.dev.ModifySRQ(d.srq, mask, a); err != nil {
			return fail(fmt.Errorf("resizing the SRQ on %s to %d entries: %w", d.u.Name, ring.Entries, err))
		}
		d.slots.grow(ring.Entries)
		d.bell.Signal() // a runner out of slots has more now
		limit = 0
	}
	mem := region.Bytes()
	for i := r.cons; i != prod; i++ {
		from := r.mem[r.ring.Entry(i):]
		to := ring.Entry(i)
		copy(mem[to:to+ring.Stride], from[:r.ring.Stride])
	}
	shm.Store32(mem, ring.Offset+abi.RingConsOff, r.cons)
	shm.Store32(mem, ring.Offset+abi.RingProdOff, prod)
	if r.dev != nil {
		shm.Store32(mem, ring.Offset+abi.RingNotifyOff, 1) // as the old ring: the client rings after posting
	}
	r.region.Close()
	r.region, r.mem, r.ring = region, mem, ring
	r.limit = limit
	return old, fd, nil
}
