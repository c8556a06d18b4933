package perf

import (
	"context"
	"sync"
	"time"
)

// runLoopback runs t with both ends in this process, on cfg.A and cfg.B.
func runLoopback(ctx context.Context, t *test, cfg *Config) (Result, error) {
	size := t.size(cfg.MsgSize)
	a, b, err := pair(cfg, t.typ, size)
	if err != nil {
		return Result{}, err
	}
	defer a.close()
	defer b.close()
	pa, err1 := a.self(0)
	pb, err2 := b.self(0)
	if err := firstErr(err1, err2); err != nil {
		return Result{}, err
	}
	ea := &end{side: a, peer: pb, size: size, d: cfg.Duration, pin: -1}
	eb := &end{side: b, peer: pa, size: size, d: cfg.Duration, pin: -1}
	if t.prepare != nil {
		if err := firstErr(t.prepare(ea), t.prepare(eb)); err != nil {
			return Result{}, err
		}
	}
	m := startMeter(a.dev)
	start := time.Now()
	var act, pas tally
	if t.lockstep != nil && cfg.Threads != 2 {
		act, err = t.lockstep(ctx, ea, eb)
	} else {
		if t.lockstep != nil {
			ea.pin, eb.pin = 0, 1 // each end of the ping-pong on its own core
		}
		act, pas, err = together(ctx, t, ea, eb)
	}
	if err != nil {
		return Result{}, err
	}
	r := t.result(size, act, pas)
	r.CPU = m.stop(time.Since(start))
	r.Path, _ = a.qp.Path()
	return r, nil
}

// together runs t's active role on a and its passive role on b, at once,
// wiring each one's done to the other's peerDone. The first role to fail
// cancels the other.
func together(ctx context.Context, t *test, a, b *end) (act, pas tally, err error) {
	ctx, g := newGroup(ctx)
	aDone, bDone := make(chan struct{}), make(chan struct{})
	a.peerDone, a.done = bDone, closer(aDone)
	b.peerDone, b.done = aDone, closer(bDone)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var perr error
		pas, perr = t.passive(ctx, b)
		b.done()
		g.fail(perr)
	}()
	act, aerr := t.active(ctx, a)
	a.done()
	g.fail(aerr)
	wg.Wait()
	return act, pas, g.wait()
}
