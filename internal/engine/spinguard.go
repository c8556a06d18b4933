package engine

import "time"

// An async-mode poller spins so that a request reaches the wire without a
// wake-up. That pays only while the spinning thread has a core to itself:
// on a host with fewer cores than spinning threads (two daemons and two
// spinning applications on two cores), every hand-off waits for the
// scheduler to preempt a spinner, and async mode measured slower than the
// sleeping workers it replaces. spinGuard watches the poller's share of the
// CPU while it spins and, when the poller is starved, has it sleep between
// batches (as the workers do) for a while before it tries spinning again.

const (
	// spinWindow is how long the guard watches before it judges.
	spinWindow = 20 * time.Millisecond
	// minSpinShare is the CPU share, in per mille of wall time, below which
	// a spinning poller counts as starved.
	minSpinShare = 900
	// firstBackoff and maxBackoff bound how long a starved poller sleeps
	// between batches before it spins again; the time doubles while each
	// try finds the CPU still contended.
	firstBackoff = 250 * time.Millisecond
	maxBackoff   = 4 * time.Second
)

// spinGuard decides whether an async poller may spin. It is a pure function
// of the clocks it is given: the poller's thread CPU time and wall time,
// both in nanoseconds.
type spinGuard struct {
	winWall, winCPU int64 // the window's start; winWall 0 = no window
	backoff         time.Duration
	sleepUntil      int64 // wall time until which the poller sleeps when idle
	starved         uint64
}

// maySpin reports whether the poller may spin at wall time now.
func (g *spinGuard) maySpin(now int64) bool { return now >= g.sleepUntil }

// restart forgets the window: the poller slept, and time asleep is not
// time starved.
func (g *spinGuard) restart() { g.winWall = 0 }

// observe records the clocks of a poller that is spinning.
func (g *spinGuard) observe(wall, cpu int64) {
	if g.winWall == 0 {
		g.winWall, g.winCPU = wall, cpu
		return
	}
	dw := wall - g.winWall
	if dw < int64(spinWindow) {
		return
	}
	if (cpu-g.winCPU)*1000 < dw*minSpinShare {
		g.backoff = min(max(2*g.backoff, firstBackoff), maxBackoff)
		g.sleepUntil = wall + int64(g.backoff)
		g.starved++
		g.winWall = 0
		return
	}
	g.backoff = 0
	g.winWall, g.winCPU = wall, cpu
}
