package perf

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// The ping-pong tests (rc_lat, uc_lat, ud_lat with SENDs,
// rc_rdma_write_lat with RDMA WRITEs): the active end sends message i and
// waits for the reply (ping), the passive end waits for message i and
// replies (pong). In loopback with one thread, lockstep plays both ends
// from one goroutine, so that a round trip costs what the fabric costs
// and not a Go scheduler hand-off.

// signalEvery is how often a ping-pong end asks for a send completion, so
// that its send queue never fills.
const signalEvery = 32

// pingPong is one end of a ping-pong: post sends message i, reap waits for
// its completion if it asked for one, await waits for the other end's
// message i (tx is the end that sent it, whose completions await may look
// at for a failure).
type pingPong[E any] interface {
	post(i uint64) error
	reap(ctx context.Context, i uint64) error
	await(ctx context.Context, i uint64, tx E) error
}

// ping is the active role of a ping-pong: round trips for the test's time.
func ping[E pingPong[E]](mk func(e *end, stop *atomic.Bool) E) role {
	return func(ctx context.Context, e *end) (tally, error) {
		defer pinThread(e.pin)()
		p := mk(e, nil)
		n, took, err := timed(e.d, func(i uint64) error {
			if err := p.post(i); err != nil {
				return err
			}
			if err := p.reap(ctx, i); err != nil {
				return err
			}
			return p.await(ctx, i, p)
		})
		return tally{Ops: n, Bytes: 2 * n * uint64(e.size), Time: took}, err
	}
}

// pong is the passive role of a ping-pong: it answers until the other end
// is done.
func pong[E pingPong[E]](mk func(e *end, stop *atomic.Bool) E) role {
	return func(ctx context.Context, e *end) (tally, error) {
		defer pinThread(e.pin)()
		stop, unwatch := watch(e.peerDone)
		defer unwatch()
		p := mk(e, stop)
		for i := uint64(0); ; i++ {
			err := p.await(ctx, i, p)
			if err == nil {
				err = p.post(i)
			}
			if err == nil {
				err = p.reap(ctx, i)
			}
			if err != nil {
				if stop.Load() {
					return tally{Ops: i}, nil
				}
				return tally{Ops: i}, err
			}
		}
	}
}

// lockstep plays both ends of a ping-pong from one goroutine.
func lockstep[E pingPong[E]](mk func(e *end, stop *atomic.Bool) E) func(ctx context.Context, a, b *end) (tally, error) {
	return func(ctx context.Context, a, b *end) (tally, error) {
		pa, pb := mk(a, nil), mk(b, nil)
		n, took, err := timed(a.d, func(i uint64) error {
			if err := pa.post(i); err != nil {
				return err
			}
			if err := pb.await(ctx, i, pa); err != nil {
				return err
			}
			if err := pa.reap(ctx, i); err != nil {
				return err
			}
			if err := pb.post(i); err != nil {
				return err
			}
			if err := pa.await(ctx, i, pb); err != nil {
				return err
			}
			return pb.reap(ctx, i)
		})
		return tally{Ops: n, Bytes: 2 * n * uint64(a.size), Time: took}, err
	}
}

// sendEnd is one end of a SEND ping-pong.
type sendEnd struct {
	e      *end
	wr     []vrdma.SendWR
	stop   *atomic.Bool // set when the other end is done; nil: never
	pinned bool
}

func newSendEnd(e *end, stop *atomic.Bool) *sendEnd {
	wr := []vrdma.SendWR{{Opcode: ibv.WRSend, SGL: []ibv.SGE{e.mr.SGE(0, e.size)}, AH: e.ah,
		RemoteQPN: e.peer.ep.QPN, RemoteQKey: qkey}}
	if e.size <= e.qp.Cap().MaxInlineData {
		wr[0].Flags |= ibv.SendInline
	}
	return &sendEnd{e: e, wr: wr, stop: stop, pinned: e.pin >= 0}
}

func (p *sendEnd) post(i uint64) error {
	p.wr[0].Flags &^= ibv.SendSignaled
	if i%signalEvery == 0 {
		p.wr[0].Flags |= ibv.SendSignaled
	}
	return p.e.qp.PostSend(p.wr)
}

func (p *sendEnd) reap(ctx context.Context, i uint64) error {
	if i%signalEvery != 0 {
		return nil
	}
	_, err := poll(ctx, p.stop, p.pinned, p.e.scq, p.e.wc[:1])
	return err
}

// await waits for the other end's message and posts a receive in its place.
func (p *sendEnd) await(ctx context.Context, _ uint64, _ *sendEnd) error {
	if _, err := poll(ctx, p.stop, p.pinned, p.e.rcq, p.e.wc[:1]); err != nil {
		return err
	}
	return p.e.postRecvs(1, p.e.size)
}

// writeEnd is one end of an RDMA WRITE ping-pong: each end writes into the
// other's region, the last byte of the message a sequence number, and
// spins on its own memory until the reply's lands, as qperf's
// rc_rdma_write_lat polls the last byte.
type writeEnd struct {
	e        *end
	wr       []vrdma.SendWR
	stop     *atomic.Bool
	pinned   bool
	last     *byte // the last byte of the message sent
	landing  *byte // the last byte of the message the other end writes here
	unreaped int   // signaled writes whose completion has not been polled
}

func newWriteEnd(e *end, stop *atomic.Bool) *writeEnd {
	size := e.size
	buf := e.mr.Bytes()
	wr := []vrdma.SendWR{{Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{e.mr.SGE(0, size)},
		RemoteAddr: e.peer.addr + uint64(size+64), RKey: e.peer.rkey}}
	return &writeEnd{e: e, wr: wr, stop: stop, pinned: e.pin >= 0, last: &buf[size-1], landing: &buf[size+64+size-1]}
}

// seq is the byte message i ends with: odd, so never the region's 0, and
// different from message i-1's.
func seq(i uint64) byte { return byte(2*i) | 1 }

func (w *writeEnd) post(i uint64) error {
	*w.last = seq(i)
	w.wr[0].Flags = 0
	if i%signalEvery == 0 {
		w.wr[0].Flags = ibv.SendSignaled
	}
	if err := w.e.qp.PostSend(w.wr); err != nil {
		return err
	}
	if i%signalEvery == 0 {
		w.unreaped++
	}
	return nil
}

func (w *writeEnd) reap(ctx context.Context, _ uint64) error {
	for ; w.unreaped > 0; w.unreaped-- {
		if _, err := poll(ctx, w.stop, w.pinned, w.e.scq, w.e.wc[:1]); err != nil {
			return err
		}
	}
	return nil
}

// await spins until message i lands here. Every 4096 spins it looks at
// tx's send completions: a write that failed completes even when it was
// not signaled, and no reply will come.
func (w *writeEnd) await(ctx context.Context, i uint64, tx *writeEnd) error {
	want := seq(i)
	for n := 0; atomicLoadByte(w.landing) != want; n++ {
		if n&1023 != 1023 {
			continue
		}
		spinYield(w.pinned)
		if n&4095 != 4095 {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("rdma write never landed: %w", ctx.Err())
		}
		if w.stop != nil && w.stop.Load() {
			return errStopped
		}
		if err := tx.peek(); err != nil {
			return err
		}
	}
	return nil
}

// peek polls one send completion without waiting and fails if it failed.
func (w *writeEnd) peek() error {
	got, err := w.e.scq.Poll(w.e.wc[:1])
	if err != nil || got == 0 {
		return err
	}
	if err := w.e.wc[0].Err(); err != nil {
		return err
	}
	if w.unreaped > 0 {
		w.unreaped--
	}
	return nil
}
