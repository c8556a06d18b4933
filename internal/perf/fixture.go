package perf

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/shm"
)

// side is one end of a test: a device with one QP, its CQs and one region.
type side struct {
	dev *vrdma.Device
	pd  *vrdma.PD
	mr  *vrdma.MR
	scq *vrdma.CQ
	rcq *vrdma.CQ
	qp  *vrdma.QP
	ah  *vrdma.AH
	wc  []vrdma.WorkCompletion
	rwr []vrdma.RecvWR
	sge []vrdma.SGE
}

const (
	depth   = 64 // work requests in flight per QP
	cqDepth = 4 * depth
)

func openSide(o vrdma.Options, typ vrdma.QPType, size int) (*side, error) {
	dev, err := vrdma.Open("vrdma0", o)
	if err != nil {
		return nil, err
	}
	s := &side{dev: dev, wc: make([]vrdma.WorkCompletion, cqDepth)}
	fail := func(err error) (*side, error) { s.close(); return nil, err }
	if s.pd, err = dev.AllocPD(); err != nil {
		return fail(err)
	}
	// Twice the message: the first half is sent from, the second received
	// into, so that the two directions of rc_bi_bw do not share bytes.
	if s.mr, err = s.pd.AllocMR(2*size+128, vrdma.AccessLocalWrite|vrdma.AccessRemoteWrite|vrdma.AccessRemoteRead|vrdma.AccessRemoteAtomic); err != nil {
		return fail(err)
	}
	if s.scq, err = dev.CreateCQ(cqDepth); err != nil {
		return fail(err)
	}
	if s.rcq, err = dev.CreateCQ(cqDepth); err != nil {
		return fail(err)
	}
	s.qp, err = s.pd.CreateQP(vrdma.QPInitAttr{Type: typ, SendCQ: s.scq, RecvCQ: s.rcq,
		Cap: vrdma.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
	if err != nil {
		return fail(err)
	}
	return s, nil
}

func (s *side) close() {
	if s.qp != nil {
		s.qp.Destroy()
	}
	if s.scq != nil {
		s.scq.Destroy()
	}
	if s.rcq != nil {
		s.rcq.Destroy()
	}
	if s.ah != nil {
		s.ah.Destroy()
	}
	if s.mr != nil {
		s.mr.Dereg()
	}
	if s.pd != nil {
		s.pd.Dealloc()
	}
	s.dev.Close()
}

// openPair opens and connects both ends for messages of size bytes, which
// it lowers to the MTU for UD, and returns the size used.
func openPair(cfg *Config, typ vrdma.QPType, size int) (a, b *side, used int, err error) {
	if typ == vrdma.UD {
		size = min(size, 4096)
	}
	a, b, err = pair(cfg, typ, size)
	return a, b, size, err
}

func closePair(a, b *side) {
	a.close()
	b.close()
}

// pair opens both ends and connects them.
func pair(cfg *Config, typ vrdma.QPType, size int) (a, b *side, err error) {
	if a, err = openSide(cfg.A, typ, size); err != nil {
		return nil, nil, err
	}
	if b, err = openSide(cfg.B, typ, size); err != nil {
		a.close()
		return nil, nil, err
	}
	ea, err1 := a.qp.Endpoint(0)
	eb, err2 := b.qp.Endpoint(0)
	o := vrdma.DefaultConnectOptions()
	o.MinRNRTimer = 1 // 10 µs: a receiver that falls behind costs little
	if err = firstErr(err1, err2, a.qp.Connect(eb, &o), b.qp.Connect(ea, &o)); err != nil {
		a.close()
		b.close()
		return nil, nil, err
	}
	if typ == vrdma.UD {
		if a.ah, err = a.pd.CreateAH(vrdma.AHAttr{DGID: eb.GID}); err == nil {
			b.ah, err = b.pd.CreateAH(vrdma.AHAttr{DGID: ea.GID})
		}
		if err != nil {
			a.close()
			b.close()
			return nil, nil, err
		}
	}
	return a, b, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// postRecvs posts n receives of size bytes (plus the GRH for UD).
func (s *side) postRecvs(n, size int) error {
	if cap(s.rwr) < n {
		s.rwr = make([]vrdma.RecvWR, n)
		s.sge = make([]vrdma.SGE, n)
	}
	for i := 0; i < n; i++ {
		s.sge[i] = s.mr.SGE(size, size+64)
		s.rwr[i] = vrdma.RecvWR{ID: uint64(i), SGL: s.sge[i : i+1]}
	}
	return s.qp.PostRecv(s.rwr[:n])
}

// spinPoll polls cq until it returns at least one completion, yielding to
// the Go scheduler and the OS now and then so that threads sharing the CPU run.
func spinPoll(ctx context.Context, cq *vrdma.CQ, wc []vrdma.WorkCompletion) (int, error) {
	return poll(ctx, nil, false, cq, wc)
}

// spinPollUntil is spinPoll for the pinned threads of pingPong2: it gives up
// once stop is set, and yields only to the OS (see pinnedYield).
func spinPollUntil(ctx context.Context, stop *atomic.Bool, cq *vrdma.CQ, wc []vrdma.WorkCompletion) (int, error) {
	return poll(ctx, stop, true, cq, wc)
}

// poll spins on cq until a completion comes, ctx ends or stop is set (if
// given). A pinned caller yields only to the OS, others to Go's scheduler too.
func poll(ctx context.Context, stop *atomic.Bool, pinned bool, cq *vrdma.CQ, wc []vrdma.WorkCompletion) (int, error) {
	for i := 0; ; i++ {
		n, err := cq.Poll(wc)
		if err != nil {
			return n, err
		}
		if n > 0 {
			for j := 0; j < n; j++ {
				if e := wc[j].Err(); e != nil {
					return n, e
				}
			}
			return n, nil
		}
		if i&1023 == 1023 {
			if pinned {
				pinnedYield()
			} else {
				yield()
			}
			if i&4095 == 4095 {
				if ctx.Err() != nil {
					return 0, fmt.Errorf("no completion: %w", ctx.Err())
				}
				if stop != nil && stop.Load() {
					return 0, errStopped
				}
			}
		}
	}
}

// yield lets other goroutines and other threads on this core run: a spin
// loop that never yields costs whoever shares its core a scheduler slice.
func yield() {
	runtime.Gosched()
	shm.Yield()
}

// pinnedYield is yield for a goroutine locked to its thread: only the OS's
// sched_yield. runtime.Gosched would park the locked thread, and waking it
// again is a cross-core wake-up, tens of microseconds here.
func pinnedYield() { shm.Yield() }
