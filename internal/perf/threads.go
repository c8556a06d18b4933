package perf

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma"
	"golang.org/x/sys/unix"
)

// pinThread locks the calling goroutine to its OS thread and, on a machine
// with more than one CPU, that thread to cpu, as qperf's and UCX's ping-pong
// runs pin their two processes to two cores.
func pinThread(cpu int) {
	runtime.LockOSThread()
	if runtime.NumCPU() > 1 {
		var set unix.CPUSet
		set.Set(cpu % runtime.NumCPU())
		_ = unix.SchedSetaffinity(0, &set)
	}
}

// pingPong2 runs a ping-pong with each end on its own pinned thread: ping
// sends message i and waits for the reply, pong waits for message i and
// replies. It returns the round trips done and the time they took.
//
// stop is set when ping is done; pong's waits must give up when they see it.
func pingPong2(ctx context.Context, d time.Duration, stop *atomic.Bool, ping, pong func(i uint64) error) (uint64, time.Duration, error) {
	pongErr := make(chan error, 1)
	go func() {
		pinThread(1)
		defer runtime.UnlockOSThread()
		for i := uint64(0); ; i++ {
			if err := pong(i); err != nil {
				if stop.Load() {
					err = nil
				}
				pongErr <- err
				return
			}
		}
	}()
	pinThread(0)
	defer runtime.UnlockOSThread()
	start := time.Now()
	deadline := start.Add(d)
	var i uint64
	var err error
	for ; ; i++ {
		if err = ping(i); err != nil {
			break
		}
		if i&255 == 0 && time.Now().After(deadline) {
			i++
			break
		}
	}
	elapsed := time.Since(start)
	stop.Store(true)
	if perr := <-pongErr; err == nil {
		err = perr
	}
	return i, elapsed, err
}

// spinUntil spins until cond holds, yielding now and then; it gives up when
// stop is set or ctx ends.
func spinUntil(ctx context.Context, stop *atomic.Bool, cond func() bool) error {
	for n := 0; !cond(); n++ {
		if n&1023 == 1023 {
			pinnedYield()
			if n&4095 == 4095 {
				if ctx.Err() != nil {
					return fmt.Errorf("no reply: %w", ctx.Err())
				}
				if stop != nil && stop.Load() {
					return errStopped
				}
			}
		}
	}
	return nil
}

var errStopped = fmt.Errorf("stopped")

// writeLat2 is rc_rdma_write_lat with each end on its own core.
func writeLat2(ctx context.Context, a, b *side, size int, d time.Duration) (uint64, time.Duration, error) {
	var stop atomic.Bool
	at := func(s *side) []byte { return s.mr.Bytes()[size+64 : 2*size+64] }
	mk := func(tx, rx *side) []vrdma.SendWR {
		return []vrdma.SendWR{{Opcode: vrdma.WRRDMAWrite, SGL: []vrdma.SGE{tx.mr.SGE(0, size)}, RemoteAddr: rx.mr.Addr() + uint64(size+64), RKey: rx.mr.RKey()}}
	}
	ab, ba := mk(a, b), mk(b, a)
	send := func(tx *side, wr []vrdma.SendWR, seq byte, i uint64) error {
		tx.mr.Bytes()[size-1] = seq
		wr[0].Flags = 0
		if i%32 == 0 {
			wr[0].Flags = vrdma.SendSignaled
		}
		if err := tx.qp.PostSend(wr); err != nil {
			return err
		}
		if i%32 == 0 {
			_, err := spinPollUntil(ctx, &stop, tx.scq, tx.wc[:1])
			return err
		}
		return nil
	}
	wait := func(rx *side, seq byte) error {
		mem := at(rx)
		err := spinUntil(ctx, &stop, func() bool { return atomicLoadByte(&mem[size-1]) == seq })
		return err
	}
	seqOf := func(i uint64, pong bool) byte {
		v := byte(i*2) | 1
		if pong {
			v = byte(i*2+1) | 1
		}
		return v
	}
	ping := func(i uint64) error {
		if err := send(a, ab, seqOf(i, false), i); err != nil {
			return err
		}
		return wait(a, seqOf(i, true))
	}
	pong := func(i uint64) error {
		if err := wait(b, seqOf(i, false)); err != nil {
			return err
		}
		return send(b, ba, seqOf(i, true), i)
	}
	return pingPong2(ctx, d, &stop, ping, pong)
}

// sendLat2 is rc_lat (or uc_lat, ud_lat) with each end on its own core.
func sendLat2(ctx context.Context, a, b *side, ab, ba []vrdma.SendWR, size int, d time.Duration) (uint64, time.Duration, error) {
	var stop atomic.Bool
	hop := func(tx, rx *side, wr []vrdma.SendWR, i uint64, first bool) error {
		if !first {
			// wait for the peer's message, then answer
			if _, err := spinPollUntil(ctx, &stop, rx.rcq, rx.wc[:1]); err != nil {
				return err
			}
			if err := rx.postRecvs(1, size); err != nil {
				return err
			}
		}
		wr[0].Flags &^= vrdma.SendSignaled
		if i%32 == 0 {
			wr[0].Flags |= vrdma.SendSignaled
		}
		if err := tx.qp.PostSend(wr); err != nil {
			return err
		}
		if i%32 == 0 {
			if _, err := spinPollUntil(ctx, &stop, tx.scq, tx.wc[:1]); err != nil {
				return err
			}
		}
		return nil
	}
	ping := func(i uint64) error {
		if err := hop(a, b, ab, i, true); err != nil {
			return err
		}
		if _, err := spinPollUntil(ctx, &stop, a.rcq, a.wc[:1]); err != nil {
			return err
		}
		return a.postRecvs(1, size)
	}
	pong := func(i uint64) error { return hop(b, b, ba, i, false) }
	return pingPong2(ctx, d, &stop, ping, pong)
}
