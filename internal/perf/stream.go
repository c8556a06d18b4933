package perf

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// The SEND bandwidth tests (rc_bw, uc_bw, ud_bw, rc_bi_bw): the active end
// streams SENDs to the passive one, which counts what it receives; in
// rc_bi_bw the passive end streams back at the same time. Each end's
// sender and receiver are goroutines of their own that busy-poll their
// completion queue, as perftest and qperf do.

// streamActive sends for the test's time; with bi it also counts the
// other end's stream.
func streamActive(bi bool) role {
	return func(ctx context.Context, e *end) (tally, error) {
		ctx, g := newGroup(ctx)
		var got atomic.Uint64
		stop := make(chan struct{})
		start := time.Now()
		g.run(func() error { defer e.done(); return sendStream(ctx, e, stop) })
		if bi {
			g.run(func() error { return recvStream(ctx, e, e.peerDone, &got) })
		}
		t := window(ctx, start, e.d, nil, &got, e.size, bi) // only rc_bi_bw's active end counts
		close(stop)
		return t, g.wait()
	}
}

// streamPassive counts what it receives for the test's time (or until the
// other end is done, if that comes first); with bi it also sends until
// the other end is done.
func streamPassive(bi bool) role {
	return func(ctx context.Context, e *end) (tally, error) {
		ctx, g := newGroup(ctx)
		var got atomic.Uint64
		start := time.Now()
		g.run(func() error { return recvStream(ctx, e, e.peerDone, &got) })
		if bi {
			g.run(func() error { defer e.done(); return sendStream(ctx, e, e.peerDone) })
		}
		t := window(ctx, start, e.d, e.peerDone, &got, e.size, true)
		return t, g.wait()
	}
}

// window waits until d after start, stop closes or ctx ends, and returns
// the messages got counted by then. With first (an end that counts what
// it receives), a window that ends on its timer before the first message
// was counted goes on until one is (or stop or ctx): on a loaded machine
// a short run (-t 0.1) can pass before the other end's first message
// arrives, and a rate of 0 would be a measurement of the start-up, not of
// the path.
func window(ctx context.Context, start time.Time, d time.Duration, stop <-chan struct{}, got *atomic.Uint64, size int, first bool) tally {
	timer := time.NewTimer(time.Until(start.Add(d)))
	defer timer.Stop()
	select {
	case <-timer.C:
		if !first {
			break
		}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for got.Load() == 0 {
			select {
			case <-tick.C:
			case <-stop:
				return windowTally(got, size, start)
			case <-ctx.Done():
				return windowTally(got, size, start)
			}
		}
	case <-stop:
	case <-ctx.Done():
	}
	return windowTally(got, size, start)
}

func windowTally(got *atomic.Uint64, size int, start time.Time) tally {
	n := got.Load()
	return tally{Ops: n, Bytes: n * uint64(size), Time: time.Since(start)}
}

// sendStream keeps depth SENDs in flight until stop closes, then waits for
// the last of them to complete.
func sendStream(ctx context.Context, e *end, stop <-chan struct{}) error {
	wr := []vrdma.SendWR{{Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{e.mr.SGE(0, e.size)},
		AH: e.ah, RemoteQPN: e.peer.ep.QPN, RemoteQKey: qkey}}
	inflight := 0
	for {
		select {
		case <-stop:
			for inflight > 0 {
				n, err := spinPoll(ctx, e.scq, e.wc)
				if err != nil {
					return err
				}
				inflight -= n
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		for inflight < depth {
			if err := e.qp.PostSend(wr); err != nil {
				return err
			}
			inflight++
		}
		n, err := spinPoll(ctx, e.scq, e.wc)
		if err != nil {
			return err
		}
		inflight -= n
	}
}

// recvStream counts the messages that arrive and posts a receive for each,
// until sent closes: a SEND that finds no receive waits on RNR, so the
// receives go on until the sender has seen its last SEND complete. The
// receive queue is full when it starts (see prepareRecvs).
func recvStream(ctx context.Context, e *end, sent <-chan struct{}, got *atomic.Uint64) error {
	wc := make([]vrdma.WorkCompletion, depth)
	idle := 0
	for {
		select {
		case <-sent:
			return nil
		default:
		}
		n, err := e.rcq.Poll(wc)
		if err != nil {
			return err
		}
		if n == 0 {
			if idle++; idle&1023 == 0 {
				yield()
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
			continue
		}
		for i := 0; i < n; i++ {
			if err := wc[i].Err(); err != nil {
				return err
			}
		}
		got.Add(uint64(n))
		if err := e.postRecvs(n, e.size); err != nil {
			return err
		}
	}
}

// prepareRecvs fills the receive queue before the test starts, so that
// the first messages find receives.
func prepareRecvs(e *end) error { return e.postRecvs(depth, e.size) }
