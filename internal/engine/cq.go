package engine

import (
	"sync"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// CQ is a completion queue: the daemon produces, the client consumes.
type CQ struct {
	Handle uint32
	Events EventSink

	mu     sync.Mutex
	region *shm.Region
	mem    []byte
	ring   abi.RingLayout
	notify *shm.Doorbell
	prod   uint32 // the daemon's own copy; never read back from shared memory
	failed bool
	users  int // QPs that complete into this CQ
}

// NewCQ creates a CQ able to hold at least cqe completions.
func NewCQ(cqe int) (*CQ, error) { return newCQ(cqe, abi.CQESize) }

// NewTimestampedCQ creates a CQ able to hold at least cqe completions
// whose entries also say when the daemon wrote them (abi.CQETimestampOff;
// docs/design/cq-timestamps.md).
func NewTimestampedCQ(cqe int) (*CQ, error) { return newCQ(cqe, abi.CQETSSize) }

func newCQ(cqe, stride int) (*CQ, error) {
	ring := cqRing(cqe, stride)
	region, err := shm.NewRegion("vrdma-cq", ring.Size())
	if err != nil {
		return nil, err
	}
	ev, err := shm.NewDoorbell()
	if err != nil {
		region.Close()
		return nil, err
	}
	return &CQ{region: region, mem: region.Bytes(), ring: ring, notify: ev}, nil
}

// Ring returns the ring layout; RegionFD the ring's memfd (the CQ's own).
// Both change when the CQ is resized (Resize).
func (c *CQ) Ring() abi.RingLayout { c.mu.Lock(); defer c.mu.Unlock(); return c.ring }
func (c *CQ) RegionFD() int        { c.mu.Lock(); defer c.mu.Unlock(); return c.region.FD() }

// ShareNotify returns new descriptors of the notification doorbell's read
// and write ends for the client (its own open file descriptions); the
// caller closes them once passed.
func (c *CQ) ShareNotify() (r, w int, err error) {
	if r, err = c.notify.ShareReader(); err != nil {
		return -1, -1, err
	}
	if w, err = c.notify.ShareWriter(); err != nil {
		unix.Close(r)
		return -1, -1, err
	}
	return r, w, nil
}
func (c *CQ) Size() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.mem) }

// push appends a completion. It returns false when the CQ has overflowed
// (or overflowed before): the completion is lost, so the CQ goes to error,
// its owner hears a CQ_ERR event and the caller moves its QP to error.
func (c *CQ) push(e *abi.CQE) bool {
	c.mu.Lock()
	if c.failed || c.mem == nil {
		c.mu.Unlock()
		return false
	}
	cons := shm.Load32(c.mem, abi.RingConsOff)
	n, err := c.ring.Pending(c.prod, cons)
	held := min(int(shm.Load32(c.mem, abi.RingHeldOff)), c.ring.Entries) // the library's own, untrusted
	if err != nil || n+held >= c.ring.Entries {
		c.failed = true
		bits := uint32(abi.RingErrOverrun)
		if err != nil {
			bits = abi.RingErrCorrupt
		}
		shm.Store32(c.mem, abi.RingErrOff, bits)
		c.mu.Unlock()
		c.notify.Signal()
		if c.Events != nil {
			c.Events.Event(abi.EventCQErr, c.Handle, 0, "completion queue overrun: poll faster or create a larger CQ")
		}
		return false
	}
	slot := c.mem[c.ring.Entry(c.prod):]
	abi.PutCQE(slot, e)
	if c.ring.Stride >= abi.CQETSSize {
		mono, wall := clocks()
		abi.PutCQETimestamps(slot, mono, wall)
	}
	c.prod++
	shm.Store32(c.mem, abi.RingProdOff, c.prod)
	armed := shm.Load32(c.mem, abi.RingNotifyOff) != 0
	if armed {
		armed = shm.Swap32(c.mem, abi.RingNotifyOff, 0) != 0
	}
	c.mu.Unlock()
	if armed {
		c.notify.Signal()
	}
	return true
}

// Timestamped reports whether c's entries carry timestamps.
func (c *CQ) Timestamped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ring.Stride >= abi.CQETSSize
}

// clocks returns CLOCK_MONOTONIC and CLOCK_REALTIME now, in nanoseconds.
// The monotonic clock is read with clock_gettime itself (a system call,
// only for timestamped CQs): Go's time.Time carries it only relative to the
// process's start, and an offset measured once is off by the time the
// measurement took, which puts stamps after the moment they were taken.
func clocks() (mono, wall uint64) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil {
		mono = uint64(ts.Nano())
	}
	return mono, uint64(time.Now().UnixNano())
}

// Use records a QP completing into c; Unuse undoes it.
func (c *CQ) Use()   { c.mu.Lock(); c.users++; c.mu.Unlock() }
func (c *CQ) Unuse() { c.mu.Lock(); c.users--; c.mu.Unlock() }

// Busy reports whether QPs still complete into c.
func (c *CQ) Busy() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.users > 0 }

// Close frees the CQ.
func (c *CQ) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem == nil {
		return
	}
	c.mem = nil
	c.region.Close()
	c.notify.Close()
}
