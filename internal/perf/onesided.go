package perf

import (
	"context"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// The one-sided tests (rc_rdma_write_bw, rc_rdma_read_bw,
// rc_compare_swap_mr, rc_fetch_add_mr, rc_rdma_read_lat): the active end
// works on the passive end's region, whose CPU has nothing to do.

// isAtomic reports whether op is one of the two atomics.
func isAtomic(op ibv.Opcode) bool {
	return op == ibv.WRAtomicCmpAndSwp || op == ibv.WRAtomicFetchAndAdd
}

// oneSidedBW streams RDMA WRITEs, READs or atomics into the other end's
// region for the test's time, as many in flight as the QP allows.
func oneSidedBW(op ibv.Opcode) role {
	return func(ctx context.Context, e *end) (tally, error) {
		size := e.size
		local := e.mr.SGE(0, size)
		if op == ibv.WRRDMARead || isAtomic(op) {
			local = e.mr.SGE(size+64, size)
		}
		wr := []vrdma.SendWR{{Opcode: op, Flags: ibv.SendSignaled, SGL: []ibv.SGE{local},
			RemoteAddr: e.peer.addr, RKey: e.peer.rkey, CompareAdd: 1}}
		inflight := depth
		if isAtomic(op) || op == ibv.WRRDMARead {
			inflight = 16 // max_rd_atomic
		}
		var done uint64
		out := 0
		start := time.Now()
		deadline := start.Add(e.d)
		for {
			for out < inflight {
				if err := e.qp.PostSend(wr); err != nil {
					return tally{}, err
				}
				out++
			}
			n, err := spinPoll(ctx, e.scq, e.wc)
			if err != nil {
				return tally{}, err
			}
			out -= n
			done += uint64(n)
			if done&63 < uint64(n) && time.Now().After(deadline) {
				break
			}
		}
		for out > 0 {
			n, err := spinPoll(ctx, e.scq, e.wc)
			if err != nil {
				return tally{}, err
			}
			out -= n
			done += uint64(n)
		}
		return tally{Ops: done, Bytes: done * uint64(size), Time: time.Since(start)}, nil
	}
}

// oneSidedLat times one READ (or atomic) at a time, round trip.
func oneSidedLat(op ibv.Opcode) role {
	return func(ctx context.Context, e *end) (tally, error) {
		wr := []vrdma.SendWR{{Opcode: op, Flags: ibv.SendSignaled, SGL: []ibv.SGE{e.mr.SGE(e.size+64, e.size)},
			RemoteAddr: e.peer.addr, RKey: e.peer.rkey}}
		n, took, err := timed(e.d, func(uint64) error {
			if err := e.qp.PostSend(wr); err != nil {
				return err
			}
			_, err := spinPoll(ctx, e.scq, e.wc[:1])
			return err
		})
		return tally{Ops: n, Bytes: n * uint64(e.size), Time: took}, err
	}
}

// target is the passive end of a one-sided test: it waits until the
// active end is done.
func target(ctx context.Context, e *end) (tally, error) {
	select {
	case <-e.peerDone:
		return tally{}, nil
	case <-ctx.Done():
		return tally{}, ctx.Err()
	}
}
