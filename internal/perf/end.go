package perf

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma"
)

// peer is what one end of a test knows of the other: where its QP is and
// where its region is. In loopback it is read off the other side; between
// hosts it comes over the control connection.
type peer struct {
	ep   vrdma.Endpoint
	rkey uint32
	addr uint64 // the region's address, as the other end's adapter knows it
	len  int
}

// end is one side of a running test: its verbs objects, the other end's
// address, the test's message size and time, and the two signals the ends
// give each other (through channels in one process, over the control
// connection between two).
type end struct {
	*side
	peer peer
	size int
	d    time.Duration
	pin  int // the CPU to pin the role's thread to; -1 for none

	// peerDone closes when the other end will send nothing more.
	peerDone <-chan struct{}
	// done tells the other end that this one will send nothing more. It
	// may be called more than once; the drivers call it when a role
	// returns, and a role that goes on receiving calls it earlier.
	done func()
}

// role is one end's part of a test: the active role drives the test for
// e.d, the passive one serves it until e.peerDone closes. A role returns
// what it counted.
type role func(ctx context.Context, e *end) (tally, error)

// closer returns a func that closes ch, once however often it is called.
func closer(ch chan struct{}) func() {
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// watch returns a flag that is set once ch closes, for spin loops that
// cannot select, and a func that ends the watching.
func watch(ch <-chan struct{}) (*atomic.Bool, func()) {
	var flag atomic.Bool
	quit := make(chan struct{})
	go func() {
		select {
		case <-ch:
			flag.Store(true)
		case <-quit:
		}
	}()
	return &flag, func() { close(quit) }
}

// group runs goroutines, keeps the first error and cancels the others'
// context when one fails.
type group struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
	cancel context.CancelFunc
}

func newGroup(ctx context.Context) (context.Context, *group) {
	ctx, cancel := context.WithCancel(ctx)
	return ctx, &group{cancel: cancel}
}

// fail records err if it is the first, and cancels the group.
func (g *group) fail(err error) {
	if err == nil {
		return
	}
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
	g.cancel()
}

func (g *group) run(f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.fail(f())
	}()
}

// first returns the first error so far.
func (g *group) first() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// wait waits for the goroutines and returns the first error.
func (g *group) wait() error {
	g.wg.Wait()
	g.cancel()
	return g.first()
}

// clockEvery is about how often timed looks at the clock.
const clockEvery = 50 * time.Microsecond

// timed calls step with 0, 1, 2… until d has passed and returns the steps
// done and the time they took. It looks at the clock about every
// clockEvery: after every step when steps are slow (a round trip over a
// long link), after every 256th at most when they are fast, so that
// neither reading the clock nor overrunning d costs much.
func timed(d time.Duration, step func(i uint64) error) (uint64, time.Duration, error) {
	start := time.Now()
	deadline := start.Add(d)
	next := uint64(1) // the step count at which to look next
	for i := uint64(0); ; {
		if err := step(i); err != nil {
			return i, time.Since(start), err
		}
		if i++; i != next {
			continue
		}
		now := time.Now()
		if now.After(deadline) {
			return i, now.Sub(start), nil
		}
		stride := uint64(256)
		if per := now.Sub(start) / time.Duration(i); per > 0 {
			stride = min(max(uint64(clockEvery/per), 1), 256)
		}
		next = i + stride
	}
}
