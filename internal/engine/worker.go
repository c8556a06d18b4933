package engine

import (
	"context"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
)

// run is the worker of a QP on an adapter without async mode: it runs the
// send queue whenever the doorbell rings, and sleeps otherwise. Before it
// sleeps it sets the ring's notify word, so the client rings only then.
// After the wait it clears the word and reads the producer index again
// (step), whatever woke it.
func (q *QP) run() {
	defer close(q.done)
	for q.ctx.Err() == nil {
		wait, _ := q.step()
		if wait > 0 && q.wireDeadline.Load() != 0 {
			// The transport waits for a timer, and takes new requests
			// meanwhile: sleep until either.
			shm.Store32(q.mem, abi.RingNotifyOff, q.armValue())
			if !q.hasWork() {
				_ = q.doorbell.WaitTimeout(wait)
			}
			shm.Store32(q.mem, abi.RingNotifyOff, 0)
			continue
		}
		if wait > 0 {
			ctx, cancel := context.WithTimeout(q.ctx, wait)
			_ = q.doorbell.Wait(ctx)
			cancel()
			continue
		}
		shm.Store32(q.mem, abi.RingNotifyOff, q.armValue())
		if q.hasWork() {
			shm.Store32(q.mem, abi.RingNotifyOff, 0)
			continue
		}
		// No context here: arming one per sleep would allocate on every
		// wake-up. Destroy cancels q.ctx and rings the doorbell instead.
		_ = q.doorbell.Wait(context.Background())
		shm.Store32(q.mem, abi.RingNotifyOff, 0)
		// Only Destroy ends the worker (the loop condition): it cancels q.ctx
		// and rings the doorbell, and unmaps q.mem only after the worker is done.
	}
}

// armValue is the send ring's notify word for the next arming: a number
// no earlier arming of this QP used lately, never 0 (docs/design/rings.md,
// "Doorbell generations"). A client that rang for the value it sees has
// a byte in the doorbell that this arming's wait will take, or the wait
// is over and the word about to be cleared; either way the daemon reads
// the producer index again before it sleeps, so one doorbell per arming
// is enough.
func (q *QP) armValue() uint32 {
	v := q.armed.Add(1)
	if v == 0 {
		v = q.armed.Add(1)
	}
	return v
}
