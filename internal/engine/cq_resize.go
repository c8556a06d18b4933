package engine

import (
	"errors"
	"fmt"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// ErrCQClosed reports a resize of a CQ that is already closed.
var ErrCQClosed = errors.New("the completion queue is closed")

// CQBelowPendingError reports a resize to fewer entries than the CQ holds:
// completions not yet polled, with those the library holds (its held word).
type CQBelowPendingError struct {
	CQE, Pending int
}

func (e *CQBelowPendingError) Error() string {
	return fmt.Sprintf("cqe %d: the CQ holds %d completions not yet polled: poll them first or ask for at least that many", e.CQE, e.Pending)
}

// Resize replaces c's ring by one of at least cqe entries (1..MaxCQE). The
// producer waits meanwhile (c.mu): the completions between the consumer
// index and the producer are copied to the same indices of the new ring,
// whose header takes the old one's words (indices, armed, error, held), so
// a client that polls the new ring from its consumer index misses none and
// sees none twice. It must not poll the old ring meanwhile: the C library
// holds its CQ lock across the command. The doorbell stays. Resize returns
// the footprint the CQ had, for the caller to give back, and a new
// descriptor of the new ring's memfd for the client (the caller closes it
// once passed): made before the switch, so that a CQ whose client could
// not be handed its new ring keeps the old one.
func (c *CQ) Resize(cqe int) (old uint64, fd int, err error) {
	c.mu.Lock()
	ring := cqRing(cqe, c.ring.Stride) // a timestamped CQ stays one
	c.mu.Unlock()
	region, err := shm.NewRegion("vrdma-cq", ring.Size())
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem == nil {
		return fail(ErrCQClosed)
	}
	cons := shm.Load32(c.mem, abi.RingConsOff)
	n, err := c.ring.Pending(c.prod, cons)
	if err != nil {
		return fail(err)
	}
	heldWord := shm.Load32(c.mem, abi.RingHeldOff)
	held := min(int(heldWord), c.ring.Entries) // the library's own, untrusted
	// As rxe: the size asked for counts, before it is rounded up.
	if n+held > cqe {
		return fail(&CQBelowPendingError{CQE: cqe, Pending: n + held})
	}
	mem := region.Bytes()
	for i := cons; i != c.prod; i++ {
		from := c.mem[c.ring.Entry(i):]
		copy(mem[ring.Entry(i):ring.Entry(i)+ring.Stride], from[:ring.Stride])
	}
	shm.Store32(mem, abi.RingHeldOff, heldWord)
	shm.Store32(mem, abi.RingErrOff, shm.Load32(c.mem, abi.RingErrOff))
	shm.Store32(mem, abi.RingNotifyOff, shm.Load32(c.mem, abi.RingNotifyOff))
	shm.Store32(mem, abi.RingConsOff, cons)
	shm.Store32(mem, abi.RingProdOff, c.prod)
	old = uint64(c.ring.Size())
	c.region.Close()
	c.region, c.mem, c.ring = region, mem, ring
	return old, fd, nil
}
