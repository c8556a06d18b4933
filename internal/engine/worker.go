package engine

import (
	"context"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
)

// run is the worker of a QP on an adapter without async mode: it runs the
// send queue whenever the doorbell rings, and sleeps otherwise. Before it
// sleeps it sets the ring's notify word, so the client rings only then.
func (q *QP) run() {
	defer close(q.done)
	for q.ctx.Err() == nil {
		wait, _ := q.step()
		if wait > 0 && q.wireDeadline.Load() != 0 {
			// The transport waits for a timer, and takes new requests
			// meanwhile: sleep until either.
			shm.Store32(q.mem, abi.RingNotifyOff, 1)
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
		shm.Store32(q.mem, abi.RingNotifyOff, 1)
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
