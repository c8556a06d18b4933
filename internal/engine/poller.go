package engine

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// idleBeforeSleep is how long an async-mode poller spins with nothing to do
// before it sleeps on the adapter's doorbell. Spinning is what makes async
// mode fast (a cache-line hand-off instead of a ~30 µs cross-core wake-up);
// sleeping after a quiet spell bounds what an idle adapter costs.
const idleBeforeSleep = 50 * time.Millisecond

// maxSleep bounds one sleep of an idle poller while a QP's timer is due
// later than that: the sleep is cut to the timer, never lengthened.
const maxSleep = 10 * time.Millisecond

// poller runs the send queues of all QPs of the host's async-mode adapters
// on one dedicated OS thread, spinning while it has a core to spin on
// (spinguard.go).
type poller struct {
	bell *shm.Doorbell // every QP of an async adapter rings this one

	mu  sync.Mutex
	qps atomic.Pointer[[]*QP]
	// sweep is held while the poller walks a snapshot of qps, so that remove
	// returns only when no sweep can still reach the removed QP.
	sweep sync.Mutex

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	// timedSleeps and untimedSleeps count the poller's sleeps bounded by a
	// QP's timer and those that wait for a doorbell alone (no QP has one):
	// an idle poller does not tick (docs/design/idle-daemon.md).
	timedSleeps, untimedSleeps atomic.Uint64
}

func newPoller() *poller {
	bell, err := shm.NewDoorbell()
	if err != nil {
		panic(err) // a pipe fails only when descriptors run out
	}
	p := &poller{bell: bell, done: make(chan struct{})}
	empty := []*QP{}
	p.qps.Store(&empty)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.run()
	return p
}

func (p *poller) add(q *QP) {
	p.mu.Lock()
	old := *p.qps.Load()
	next := append(append([]*QP(nil), old...), q)
	p.qps.Store(&next)
	p.mu.Unlock()
	p.bell.Signal()
}

func (p *poller) remove(q *QP) {
	p.mu.Lock()
	old := *p.qps.Load()
	next := make([]*QP, 0, len(old))
	for _, x := range old {
		if x != q {
			next = append(next, x)
		}
	}
	p.qps.Store(&next)
	p.mu.Unlock()
	p.sweep.Lock()
	//lint:ignore SA2001 an empty critical section: waiting out the sweep in progress is the point
	p.sweep.Unlock()
}

func (p *poller) stop() {
	p.once.Do(func() {
		p.cancel()
		p.bell.Signal() // a poller asleep without a timer wakes only to its bell
		<-p.done
		p.bell.Close()
	})
}

func (p *poller) run() {
	defer close(p.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lastWork := time.Now()
	spins := 0
	var guard spinGuard
	for p.ctx.Err() == nil {
		worked := false
		p.sweep.Lock()
		for _, q := range *p.qps.Load() {
			if !q.hasWork() {
				continue
			}
			_, did := q.step()
			worked = worked || did
		}
		p.sweep.Unlock()
		if worked {
			spins = 0
			lastWork = time.Now()
			continue
		}
		if !guard.maySpin(nanotime()) {
			// Starved: sleep between batches, as the workers do.
			p.sleep()
			guard.restart()
			continue
		}
		spins++
		if spins&1023 != 0 {
			continue
		}
		shm.Yield()
		guard.observe(nanotime(), threadCPUTime())
		if time.Since(lastWork) < idleBeforeSleep {
			continue
		}
		// Back to sleep at once unless the wake-up brought work: the bounded
		// sleep ends every maxSleep, and an idle poller must not spin again
		// for idleBeforeSleep each time.
		p.sleep()
		guard.restart()
	}
}

// threadCPUTime returns the CPU time of the calling OS thread in
// nanoseconds (the poller's thread is locked), or 0 if the clock fails.
func threadCPUTime() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// sleep arms every QP's doorbell and waits for one to ring.
func (p *poller) sleep() {
	p.sweep.Lock()
	qps := *p.qps.Load()
	for _, q := range qps {
		q.setNotify(q.armValue())
	}
	busy := false
	for _, q := range qps {
		if q.hasWork() {
			busy = true
			break
		}
	}
	wait, timed := sleepFor(qps, nanotime())
	p.sweep.Unlock()
	if !busy {
		// Stalled QPs' timers must run while the poller sleeps, so then the
		// sleep ends with the first of them; with none it lasts until a
		// doorbell rings — a client's post, a kick, a timer that a packet
		// brought forward (deliver.go), Stop — as a worker's does. Asleep,
		// the poller is a goroutine like the workers: locked to its thread,
		// its wake-up would take two threads (the network poller's, then a
		// hand-off to the locked one).
		runtime.UnlockOSThread()
		if timed {
			p.timedSleeps.Add(1)
			_ = p.bell.WaitTimeout(wait)
		} else {
			p.untimedSleeps.Add(1)
			_ = p.bell.Wait(context.Background())
		}
		runtime.LockOSThread()
	}
	p.sweep.Lock()
	for _, q := range *p.qps.Load() {
		q.setNotify(0)
	}
	p.sweep.Unlock()
}

// sleepFor is how long an idle poller may sleep at now: until the first
// timer of qps (a stalled request's retry, the transport's), at most
// maxSleep; timed is false when none has a timer, and the poller sleeps
// until a doorbell rings.
func sleepFor(qps []*QP, now int64) (wait time.Duration, timed bool) {
	first := int64(0)
	for _, q := range qps {
		for _, d := range [2]int64{q.stallUntil.Load(), q.wireDeadline.Load()} {
			if d != 0 && (first == 0 || d < first) {
				first = d
			}
		}
	}
	if first == 0 {
		return 0, false
	}
	return min(max(time.Duration(first-now), time.Microsecond), maxSleep), true
}

func (q *QP) setNotify(v uint32) {
	q.procMu.Lock()
	if !q.dead {
		shm.Store32(q.mem, abi.RingNotifyOff, v)
	}
	q.procMu.Unlock()
}
