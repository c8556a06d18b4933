package perf

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma"
)

type testFunc func(ctx context.Context, cfg *Config) (Result, error)

// Tests maps qperf's test names to their implementations.
var tests = map[string]testFunc{
	"rc_bw":            func(ctx context.Context, c *Config) (Result, error) { return sendBW(ctx, c, vrdma.RC, false) },
	"rc_bi_bw":         func(ctx context.Context, c *Config) (Result, error) { return sendBW(ctx, c, vrdma.RC, true) },
	"uc_bw":            func(ctx context.Context, c *Config) (Result, error) { return sendBW(ctx, c, vrdma.UC, false) },
	"ud_bw":            func(ctx context.Context, c *Config) (Result, error) { return sendBW(ctx, c, vrdma.UD, false) },
	"rc_lat":           func(ctx context.Context, c *Config) (Result, error) { return sendLat(ctx, c, vrdma.RC) },
	"uc_lat":           func(ctx context.Context, c *Config) (Result, error) { return sendLat(ctx, c, vrdma.UC) },
	"ud_lat":           func(ctx context.Context, c *Config) (Result, error) { return sendLat(ctx, c, vrdma.UD) },
	"rc_rdma_write_bw": func(ctx context.Context, c *Config) (Result, error) { return oneSidedBW(ctx, c, vrdma.WRRDMAWrite) },
	"rc_rdma_read_bw":  func(ctx context.Context, c *Config) (Result, error) { return oneSidedBW(ctx, c, vrdma.WRRDMARead) },
	"rc_compare_swap_mr": func(ctx context.Context, c *Config) (Result, error) {
		return oneSidedBW(ctx, c, vrdma.WRAtomicCmpAndSwp)
	},
	"rc_fetch_add_mr": func(ctx context.Context, c *Config) (Result, error) {
		return oneSidedBW(ctx, c, vrdma.WRAtomicFetchAndAdd)
	},
	"rc_rdma_write_lat": writeLat,
	"rc_rdma_read_lat":  func(ctx context.Context, c *Config) (Result, error) { return oneSidedLat(ctx, c, vrdma.WRRDMARead) },
}

// TestNames lists the tests Run knows, conf included.
func TestNames() []string {
	return []string{"conf", "rc_bw", "rc_bi_bw", "rc_lat", "rc_rdma_write_bw", "rc_rdma_write_lat", "rc_rdma_read_bw",
		"rc_rdma_read_lat", "rc_compare_swap_mr", "rc_fetch_add_mr", "uc_bw", "uc_lat", "ud_bw", "ud_lat"}
}

// sendBW streams SENDs from a to b (and b to a for bi) for the test's time.
func sendBW(ctx context.Context, cfg *Config, typ vrdma.QPType, bi bool) (Result, error) {
	a, b, size, err := openPair(cfg, typ, cfg.MsgSize)
	if err != nil {
		return Result{}, err
	}
	defer closePair(a, b)
	meter := startMeter(a.dev)
	var received atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	report := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	stream := func(tx, rx *side) {
		// The receiver keeps posting receives until its sender has seen its
		// last SEND complete: a SEND left without a receive waits on RNR.
		sent := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := rx.postRecvs(depth, size); err != nil {
				report(err)
				return
			}
			wc := make([]vrdma.WorkCompletion, depth)
			idle := 0
			for {
				select {
				case <-sent:
					return
				default:
				}
				n, err := rx.rcq.Poll(wc)
				if err != nil {
					report(err)
					return
				}
				if n == 0 {
					if idle++; idle&1023 == 0 {
						yield()
						if ctx.Err() != nil {
							report(ctx.Err())
							return
						}
					}
					continue
				}
				for i := 0; i < n; i++ {
					if e := wc[i].Err(); e != nil {
						report(e)
						return
					}
					received.Add(uint64(size))
				}
				if err := rx.postRecvs(n, size); err != nil {
					report(err)
					return
				}
			}
		}()
		// sender
		go func() {
			defer wg.Done()
			defer close(sent)
			wr := []vrdma.SendWR{{Opcode: vrdma.WRSend, Flags: vrdma.SendSignaled, SGL: []vrdma.SGE{tx.mr.SGE(0, size)}, AH: tx.ah, RemoteQPN: rx.qp.QPN(), RemoteQKey: 0x11111111}}
			inflight := 0
			for {
				select {
				case <-stop:
					for inflight > 0 {
						n, err := spinPoll(ctx, tx.scq, tx.wc)
						if err != nil {
							report(err)
							return
						}
						inflight -= n
					}
					return
				default:
				}
				for inflight < depth {
					if err := tx.qp.PostSend(wr); err != nil {
						report(err)
						return
					}
					inflight++
				}
				n, err := spinPoll(ctx, tx.scq, tx.wc)
				if err != nil {
					report(err)
					return
				}
				inflight -= n
			}
		}()
	}
	start := time.Now()
	stream(a, b)
	if bi {
		stream(b, a)
	}
	time.Sleep(cfg.Duration)
	got := received.Load()
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if firstErr != nil {
		return Result{}, firstErr
	}
	r := Result{MsgSize: size, Seconds: elapsed.Seconds(), Messages: got / uint64(size)}
	r.BW = float64(got) / elapsed.Seconds()
	r.MsgRate = float64(r.Messages) / elapsed.Seconds()
	r.CPU = meter.stop(elapsed)
	r.Path, _ = a.qp.Path()
	return r, nil
}

// oneSidedBW streams RDMA WRITEs, READs or atomics from a into b's region.
func oneSidedBW(ctx context.Context, cfg *Config, op vrdma.Opcode) (Result, error) {
	size := cfg.MsgSize
	atomicOp := op == vrdma.WRAtomicCmpAndSwp || op == vrdma.WRAtomicFetchAndAdd
	if atomicOp {
		size = 8
	}
	a, b, _, err := openPair(cfg, vrdma.RC, size)
	if err != nil {
		return Result{}, err
	}
	defer closePair(a, b)
	meter := startMeter(a.dev)
	local := a.mr.SGE(0, size)
	if op == vrdma.WRRDMARead || atomicOp {
		local = a.mr.SGE(size+64, size)
	}
	wr := []vrdma.SendWR{{Opcode: op, Flags: vrdma.SendSignaled, SGL: []vrdma.SGE{local}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(), CompareAdd: 1}}
	inflight := depth
	if atomicOp || op == vrdma.WRRDMARead {
		inflight = 16 // max_rd_atomic
	}
	var done uint64
	out := 0
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for {
		for out < inflight {
			if err := a.qp.PostSend(wr); err != nil {
				return Result{}, err
			}
			out++
		}
		n, err := spinPoll(ctx, a.scq, a.wc)
		if err != nil {
			return Result{}, err
		}
		out -= n
		done += uint64(n)
		if done&63 < uint64(n) && time.Now().After(deadline) {
			break
		}
	}
	for out > 0 {
		n, err := spinPoll(ctx, a.scq, a.wc)
		if err != nil {
			return Result{}, err
		}
		out -= n
		done += uint64(n)
	}
	elapsed := time.Since(start)
	r := Result{MsgSize: size, Seconds: elapsed.Seconds(), Messages: done, MsgRate: float64(done) / elapsed.Seconds()}
	if !atomicOp {
		r.BW = float64(done) * float64(size) / elapsed.Seconds()
	}
	r.CPU = meter.stop(elapsed)
	r.Path, _ = a.qp.Path()
	return r, nil
}

// sendLat plays SEND ping-pong; one goroutine drives both ends.
func sendLat(ctx context.Context, cfg *Config, typ vrdma.QPType) (Result, error) {
	a, b, size, err := openPair(cfg, typ, cfg.MsgSize)
	if err != nil {
		return Result{}, err
	}
	defer closePair(a, b)
	if err := firstErr(a.postRecvs(depth, size), b.postRecvs(depth, size)); err != nil {
		return Result{}, err
	}
	meter := startMeter(a.dev)
	ab := []vrdma.SendWR{{Opcode: vrdma.WRSend, SGL: []vrdma.SGE{a.mr.SGE(0, size)}, AH: a.ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x11111111}}
	ba := []vrdma.SendWR{{Opcode: vrdma.WRSend, SGL: []vrdma.SGE{b.mr.SGE(0, size)}, AH: b.ah, RemoteQPN: a.qp.QPN(), RemoteQKey: 0x11111111}}
	if size <= a.qp.Cap().MaxInlineData {
		ab[0].Flags |= vrdma.SendInline
		ba[0].Flags |= vrdma.SendInline
	}
	hop := func(tx, rx *side, wr []vrdma.SendWR, i uint64) error {
		wr[0].Flags &^= vrdma.SendSignaled
		if i%32 == 0 {
			wr[0].Flags |= vrdma.SendSignaled // reap now and then so the send queue never fills
		}
		if err := tx.qp.PostSend(wr); err != nil {
			return err
		}
		if _, err := spinPoll(ctx, rx.rcq, rx.wc[:1]); err != nil {
			return err
		}
		if err := rx.postRecvs(1, size); err != nil {
			return err
		}
		if i%32 == 0 {
			_, err := spinPoll(ctx, tx.scq, tx.wc[:1])
			return err
		}
		return nil
	}
	if cfg.Threads == 2 {
		n, elapsed, err := sendLat2(ctx, a, b, ab, ba, size, cfg.Duration)
		if err != nil {
			return Result{}, err
		}
		return latResult(size, n, 2, elapsed, meter, a), nil
	}
	var i uint64
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for ; ; i++ {
		if err := hop(a, b, ab, i); err != nil {
			return Result{}, err
		}
		if err := hop(b, a, ba, i); err != nil {
			return Result{}, err
		}
		if i&255 == 0 && time.Now().After(deadline) {
			i++
			break
		}
	}
	elapsed := time.Since(start)
	return latResult(size, i, 2, elapsed, meter, a), nil
}

func latResult(size int, iters uint64, hops int, elapsed time.Duration, m *meter, a *side) Result {
	r := Result{MsgSize: size, Seconds: elapsed.Seconds(), Messages: iters * uint64(hops)}
	r.LatencyUS = elapsed.Seconds() * 1e6 / float64(iters) / float64(hops)
	r.MsgRate = float64(r.Messages) / elapsed.Seconds()
	r.CPU = m.stop(elapsed)
	r.Path, _ = a.qp.Path()
	return r
}

// writeLat plays RDMA WRITE ping-pong: each side writes a counter into the
// other's region and spins on its own memory until the reply lands.
func writeLat(ctx context.Context, cfg *Config) (Result, error) {
	size := max(cfg.MsgSize, 1)
	a, b, _, err := openPair(cfg, vrdma.RC, size)
	if err != nil {
		return Result{}, err
	}
	defer closePair(a, b)
	meter := startMeter(a.dev)
	if cfg.Threads == 2 {
		n, elapsed, err := writeLat2(ctx, a, b, size, cfg.Duration)
		if err != nil {
			return Result{}, err
		}
		return latResult(size, n, 2, elapsed, meter, a), nil
	}
	// The last byte of the message carries the sequence number, as qperf's
	// rc_rdma_write_lat polls the last byte.
	target := func(s *side) uint64 { return s.mr.Addr() + uint64(size+64) }
	ab := []vrdma.SendWR{{Opcode: vrdma.WRRDMAWrite, SGL: []vrdma.SGE{a.mr.SGE(0, size)}, RemoteAddr: target(b), RKey: b.mr.RKey()}}
	ba := []vrdma.SendWR{{Opcode: vrdma.WRRDMAWrite, SGL: []vrdma.SGE{b.mr.SGE(0, size)}, RemoteAddr: target(a), RKey: a.mr.RKey()}}
	hop := func(tx, rx *side, wr []vrdma.SendWR, i uint64) error {
		seq := byte(i) | 1
		tx.mr.Bytes()[size-1] = seq
		wr[0].Flags = 0
		if i%32 == 0 {
			wr[0].Flags = vrdma.SendSignaled
		}
		if err := tx.qp.PostSend(wr); err != nil {
			return err
		}
		mem := rx.mr.Bytes()
		reaped := false
		for n := 0; mem[size+64+size-1] != seq; n++ {
			if n&1023 == 1023 {
				yield()
			}
			if n&4095 == 4095 {
				if ctx.Err() != nil {
					return fmt.Errorf("rdma write never landed: %w", ctx.Err())
				}
				// A failed write completes even when unsignaled: look for it.
				got, err := tx.scq.Poll(tx.wc[:1])
				if err != nil {
					return err
				}
				if got > 0 {
					if err := tx.wc[0].Err(); err != nil {
						return err
					}
					reaped = true
				}
			}
		}
		mem[size+64+size-1] = 0
		if i%32 == 0 && !reaped {
			_, err := spinPoll(ctx, tx.scq, tx.wc[:1])
			return err
		}
		return nil
	}
	var i uint64
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for ; ; i++ {
		if err := hop(a, b, ab, 2*i); err != nil {
			return Result{}, err
		}
		if err := hop(b, a, ba, 2*i+1); err != nil {
			return Result{}, err
		}
		if i&255 == 0 && time.Now().After(deadline) {
			i++
			break
		}
	}
	return latResult(size, i, 2, time.Since(start), meter, a), nil
}

// oneSidedLat times one READ (or atomic) at a time, round trip.
func oneSidedLat(ctx context.Context, cfg *Config, op vrdma.Opcode) (Result, error) {
	size := max(cfg.MsgSize, 1)
	a, b, _, err := openPair(cfg, vrdma.RC, size)
	if err != nil {
		return Result{}, err
	}
	defer closePair(a, b)
	meter := startMeter(a.dev)
	wr := []vrdma.SendWR{{Opcode: op, Flags: vrdma.SendSignaled, SGL: []vrdma.SGE{a.mr.SGE(size+64, size)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}}
	var i uint64
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for ; ; i++ {
		if err := a.qp.PostSend(wr); err != nil {
			return Result{}, err
		}
		if _, err := spinPoll(ctx, a.scq, a.wc[:1]); err != nil {
			return Result{}, err
		}
		if i&255 == 0 && time.Now().After(deadline) {
			i++
			break
		}
	}
	return latResult(size, i, 1, time.Since(start), meter, a), nil
}
