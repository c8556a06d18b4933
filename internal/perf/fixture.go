package perf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/shm"
)

// side is one end's verbs objects: a device with one QP, its CQs and one
// region.
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
	sge []ibv.SGE
}

const (
	depth   = 64 // work requests in flight per QP
	cqDepth = 4 * depth
	qkey    = 0x11111111 // DefaultConnectOptions' Q_Key
)

// openSide opens device dev ("" for the instance's first) and makes one QP
// of type typ with a region for messages of size bytes.
func openSide(o vrdma.Options, dev string, typ ibv.QPType, size int, random bool) (*side, error) {
	if dev == "" {
		devs, err := vrdma.Devices(o)
		if err != nil {
			return nil, err
		}
		if len(devs) == 0 {
			return nil, errors.New("the instance has no adapters (`vrdma vm show` lists them): attach to another with VRDMA_INSTANCE or --instance")
		}
		dev = devs[0].Name
	}
	d, err := vrdma.Open(dev, o)
	if err != nil {
		return nil, err
	}
	s := &side{dev: d, wc: make([]vrdma.WorkCompletion, cqDepth)}
	fail := func(err error) (*side, error) { s.close(); return nil, err }
	if s.pd, err = d.AllocPD(); err != nil {
		return fail(err)
	}
	if s.mr, err = s.pd.AllocMR(regionSize(size), ibv.AccessLocalWrite|ibv.AccessRemoteWrite|ibv.AccessRemoteRead|ibv.AccessRemoteAtomic); err != nil {
		return fail(err)
	}
	if random {
		fillRandom(s.mr.Bytes())
	}
	if s.scq, err = d.CreateCQ(cqDepth); err != nil {
		return fail(err)
	}
	if s.rcq, err = d.CreateCQ(cqDepth); err != nil {
		return fail(err)
	}
	s.qp, err = s.pd.CreateQP(vrdma.QPInitAttr{Type: typ, SendCQ: s.scq, RecvCQ: s.rcq,
		Cap: vrdma.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// fillRandom fills b with pseudo-random bytes, as perftest fills its
// buffers. A region is all zeros otherwise, and on some CPUs copying zeros
// runs twice as fast as copying other bytes (docs/perf.md, "The C data
// path"), which would flatter the bandwidth tests next to perftest's.
func fillRandom(b []byte) {
	x := uint64(0x9e3779b97f4a7c15)
	for len(b) >= 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b, x)
		b = b[8:]
	}
	for i := range b {
		b[i] = byte(x >> (8 * i))
	}
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

// self returns what the other end needs to know of s, its GID the one at
// gidIndex.
func (s *side) self(gidIndex int) (peer, error) {
	ep, err := s.qp.Endpoint(gidIndex)
	if err != nil {
		return peer{}, fmt.Errorf("%s: GID index %d: %w (`vrdma devinfo -v` lists the GIDs)", s.dev.Name(), gidIndex, err)
	}
	return peer{ep: ep, rkey: s.mr.RKey(), addr: s.mr.Addr(), len: s.mr.Len()}, nil
}

// regionSize is the size of the region openSide makes for messages of
// size bytes: twice the message, so that the first half is sent from and
// the second received into, and the two directions of rc_bi_bw do not
// share bytes.
func regionSize(size int) int { return 2*size + 128 }

// fits checks that p's region is one for messages of size bytes.
func (p peer) fits(size int) error {
	if p.len < regionSize(size) {
		return fmt.Errorf("the other end's region has %d bytes where messages of %d bytes need %d: the two ends disagree about the test", p.len, size, regionSize(size))
	}
	return nil
}

// connect takes s's QP to RTS towards p, sending from the GID at
// gidIndex, and for UD makes the address handle its sends go with.
func (s *side) connect(p peer, gidIndex int) error {
	o := vrdma.DefaultConnectOptions()
	o.MinRNRTimer = 1 // 10 µs: a receiver that falls behind costs little
	o.GIDIndex = uint8(gidIndex)
	if err := s.qp.Connect(p.ep, &o); err != nil {
		return fmt.Errorf("connecting the QP to QPN 0x%06x at GID %s: %w", p.ep.QPN, p.ep.GID, err)
	}
	if s.qp.Type() != ibv.UD {
		return nil
	}
	ah, err := s.pd.CreateAH(ibv.AHAttr{DGID: p.ep.GID, SGIDIndex: uint8(gidIndex)})
	if err != nil {
		return fmt.Errorf("address handle to GID %s: %w", p.ep.GID, err)
	}
	s.ah = ah
	return nil
}

// pair opens both ends of a loopback test on cfg.A and cfg.B and connects
// them with GID 0.
func pair(cfg *Config, typ ibv.QPType, size int) (a, b *side, err error) {
	if a, err = openSide(cfg.A, "vrdma0", typ, size, cfg.Random); err != nil {
		return nil, nil, err
	}
	if b, err = openSide(cfg.B, "vrdma0", typ, size, cfg.Random); err != nil {
		a.close()
		return nil, nil, err
	}
	pa, err1 := a.self(0)
	pb, err2 := b.self(0)
	if err = firstErr(err1, err2, a.connect(pb, 0), b.connect(pa, 0)); err != nil {
		a.close()
		b.close()
		return nil, nil, err
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
		s.sge = make([]ibv.SGE, n)
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
			spinYield(pinned)
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

// errStopped ends a wait the other end will never satisfy: it is done.
var errStopped = errors.New("stopped")

// spinYield is yield or, for a goroutine locked to its thread, pinnedYield.
func spinYield(pinned bool) {
	if pinned {
		pinnedYield()
	} else {
		yield()
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
