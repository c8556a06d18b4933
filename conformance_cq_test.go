package vrdma_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// TestConformanceCQOverrun fills a small CQ: the completions it held stay
// pollable, then Poll reports ErrCQOverrun, the owner gets CQ_ERR and the
// QP that could not complete goes to ERR with QP_FATAL.
func TestConformanceCQOverrun(t *testing.T) { inEveryMode(t, conformanceCQOverrun) }

func conformanceCQOverrun(t *testing.T, e *confEnv) {
	for _, size := range []int{1, 2, 4} {
		t.Run("cqe "+strconv.Itoa(size), func(t *testing.T) {
			a := e.newSide(t, e.a, qpSpec{cqe: size})
			b := e.newSide(t, e.b, qpSpec{})
			connect(t, a, b, nil, nil)
			n := a.scq.CQE()
			if n < size {
				t.Fatalf("CQ of %d entries granted for %d asked", n, size)
			}
			for i := 0; i < n+2; i++ {
				post(t, a.qp, vrdma.SendWR{ID: uint64(i), Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
					SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)}, RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
			}
			ev := waitEvent(t, a.dev, ibv.EventCQErr, func(ev vrdma.AsyncEvent) bool { return ev.CQ == a.scq })
			if ev.Reason == "" {
				t.Error("CQ_ERR without a reason")
			}
			waitEvent(t, a.dev, ibv.EventQPFatal, qpEvent(a.qp))
			expectState(t, a.qp, ibv.QPSErr)
			wc := make([]vrdma.WorkCompletion, n+8)
			k, err := a.scq.Poll(wc)
			if k != n || !errors.Is(err, vrdma.ErrCQOverrun) {
				t.Fatalf("Poll after the overrun: %d completions, %v; want %d and ErrCQOverrun", k, err, n)
			}
			for i := 0; i < k; i++ {
				checkWC(t, wc[i], sendWC(a, uint64(i), ibv.WCRDMAWrite, 8))
			}
			if k, err := a.scq.Poll(wc); k != 0 || !errors.Is(err, vrdma.ErrCQOverrun) {
				t.Fatalf("second Poll: %d, %v; want 0 and ErrCQOverrun", k, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), confTimeout)
			defer cancel()
			if k, err := a.scq.PollWait(ctx, wc, 10); k != 0 || !errors.Is(err, vrdma.ErrCQOverrun) {
				t.Fatalf("PollWait: %d, %v; want 0 and ErrCQOverrun", k, err)
			}
			// The other CQ of the QP is unaffected.
			expectEmpty(t, a.rcq)
		})
	}
}

// TestConformanceCQWait checks that Wait returns when a completion arrives
// and with ctx.Err() when its context ends, and consumes nothing.
func TestConformanceCQWait(t *testing.T) { inEveryMode(t, conformanceCQWait) }

func conformanceCQWait(t *testing.T, e *confEnv) {
	a, b := e.pair(t, pairSpec{typ: ibv.RC})
	write := func(id uint64) {
		post(t, a.qp, vrdma.SendWR{ID: id, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
			SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)}, RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
	}
	waitAsync := func(ctx context.Context) <-chan error {
		ch := make(chan error, 1)
		go func() { ch <- a.scq.Wait(ctx) }()
		return ch
	}
	result := func(ch <-chan error) error {
		t.Helper()
		select {
		case err := <-ch:
			return err
		case <-time.After(confTimeout):
			t.Fatal("Wait did not return")
			return nil
		}
	}

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ch := waitAsync(ctx)
		cancel()
		if err := result(ch); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait: %v, want context.Canceled", err)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := a.scq.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait: %v, want context.Canceled", err)
		}
		var wc [1]vrdma.WorkCompletion
		if n, err := a.scq.PollWait(ctx, wc[:], 10); n != 0 || !errors.Is(err, context.Canceled) {
			t.Fatalf("PollWait: %d, %v; want context.Canceled", n, err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		if err := a.scq.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait: %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("completion", func(t *testing.T) {
		// After the cancelled waits above, a new Wait still sleeps and wakes.
		ctx, cancel := context.WithTimeout(context.Background(), confTimeout)
		defer cancel()
		ch := waitAsync(ctx)
		write(1)
		if err := result(ch); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		// Wait consumed nothing; a completion already there returns at once.
		if err := a.scq.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCRDMAWrite, 8))
		expectEmpty(t, a.scq)
	})
	t.Run("many", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), confTimeout)
		defer cancel()
		for i := uint64(10); i < 30; i++ {
			ch := waitAsync(ctx)
			write(i)
			if err := result(ch); err != nil {
				t.Fatal(err)
			}
			checkWC(t, pollOne(t, a.scq), sendWC(a, i, ibv.WCRDMAWrite, 8))
		}
	})
}

// TestConformanceSRQ has two QPs receive from one shared receive queue.
func TestConformanceSRQ(t *testing.T) { inEveryMode(t, conformanceSRQ) }

func conformanceSRQ(t *testing.T, e *confEnv) {
	setup := func(t *testing.T, o *vrdma.ConnectOptions) (srq *vrdma.SRQ, a1, a2, b1, b2 *side) {
		pd := otherPD(t, e.b)
		srq, err := pd.CreateSRQ(16, 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srq.Destroy() })
		b1 = e.newSide(t, e.b, qpSpec{pd: pd, srq: srq})
		b2 = e.newSide(t, e.b, qpSpec{pd: pd, srq: srq})
		a1 = e.newSide(t, e.a, qpSpec{})
		a2 = e.newSide(t, e.a, qpSpec{})
		connect(t, a1, b1, o, o)
		connect(t, a2, b2, o, o)
		return srq, a1, a2, b1, b2
	}
	send := func(t *testing.T, x *side, id uint64, op ibv.Opcode, n int) {
		post(t, x.qp, vrdma.SendWR{ID: id, Opcode: op, Imm: uint32(id), Flags: ibv.SendSignaled, SGL: []ibv.SGE{x.mr.SGE(srcOff, n)}})
		checkWC(t, pollOne(t, x.scq), sendWC(x, id, ibv.WCSend, n))
	}
	t.Run("two QPs", func(t *testing.T) {
		srq, a1, a2, b1, b2 := setup(t, nil)
		fill(a1.mr.Bytes()[srcOff:srcOff+300], 71)
		fill(a2.mr.Bytes()[srcOff:srcOff+300], 72)
		var rwrs []vrdma.RecvWR
		for i := 0; i < 4; i++ {
			// Scatter into two SGEs, in the region of b1 (same PD as the SRQ).
			rwrs = append(rwrs, recvWR(uint64(i+1), b1.mr.SGE(recvOff+i*512, 100), b1.mr.SGE(recvOff+i*512+256, 256)))
		}
		if err := srq.PostRecv(rwrs); err != nil {
			t.Fatal(err)
		}
		send(t, a1, 11, ibv.WRSend, 300)
		send(t, a2, 21, ibv.WRSendImm, 200)
		send(t, a1, 12, ibv.WRSendImm, 50)
		send(t, a2, 22, ibv.WRSend, 0)
		r1, r2 := pollN(t, b1.rcq, 2), pollN(t, b2.rcq, 2)
		checkWC(t, r1[0], recvWC(b1, 1, 300, a1))
		checkWC(t, r2[0], withImm(recvWC(b2, 2, 200, a2), 21))
		checkWC(t, r1[1], withImm(recvWC(b1, 3, 50, a1), 12))
		checkWC(t, r2[1], recvWC(b2, 4, 0, a2))
		got := func(i, n int) []byte {
			buf := b1.mr.Bytes()[recvOff+i*512:]
			return append(append([]byte(nil), buf[:100]...), buf[256:512]...)[:n]
		}
		expectBytes(t, "receive 1", got(0, 300), a1.mr.Bytes()[srcOff:srcOff+300])
		expectBytes(t, "receive 2", got(1, 200), a2.mr.Bytes()[srcOff:srcOff+200])
		expectBytes(t, "receive 3", got(2, 50), a1.mr.Bytes()[srcOff:srcOff+50])
		expectZero(t, "receive 4", got(3, 356))
		expectEmpty(t, b1.rcq, b2.rcq)
		// A QP with an SRQ takes no receives of its own.
		expectPostErr(t, b1.qp.PostRecv([]vrdma.RecvWR{recvWR(9, b1.mr.SGE(recvOff, 8))}), 0, vrdma.ErrInvalidArgument)
	})
	t.Run("RNR until the SRQ has a receive", func(t *testing.T) {
		o := vrdma.DefaultConnectOptions()
		o.MinRNRTimer = 1
		srq, a1, _, b1, _ := setup(t, &o)
		before := rnrNaks(t, a1.dev)
		post(t, a1.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a1.mr.SGE(srcOff, 10)}})
		waitFor(t, "an RNR NAK", func() bool { return rnrNaks(t, a1.dev) > before })
		if err := srq.PostRecv([]vrdma.RecvWR{recvWR(5, b1.mr.SGE(recvOff, 64))}); err != nil {
			t.Fatal(err)
		}
		checkWC(t, pollOne(t, a1.scq), sendWC(a1, 1, ibv.WCSend, 10))
		checkWC(t, pollOne(t, b1.rcq), recvWC(b1, 5, 10, a1))
	})
	t.Run("a QP in ERR leaves the SRQ to the others", func(t *testing.T) {
		srq, _, a2, b1, b2 := setup(t, nil)
		if err := srq.PostRecv([]vrdma.RecvWR{recvWR(1, b1.mr.SGE(recvOff, 64)), recvWR(2, b1.mr.SGE(recvOff+64, 64))}); err != nil {
			t.Fatal(err)
		}
		if err := b1.qp.Modify(&ibv.QPAttr{State: ibv.QPSErr}, ibv.AttrState); err != nil {
			t.Fatal(err)
		}
		// Flushing b1 flushes nothing of the SRQ's.
		send(t, a2, 21, ibv.WRSend, 10)
		send(t, a2, 22, ibv.WRSend, 20)
		r := pollN(t, b2.rcq, 2)
		checkWC(t, r[0], recvWC(b2, 1, 10, a2))
		checkWC(t, r[1], recvWC(b2, 2, 20, a2))
		expectEmpty(t, b1.rcq)
	})
}

// TestConformanceAsyncEvents checks the events a responder's device
// reports for errors it detects, and for a peer that goes away.
func TestConformanceAsyncEvents(t *testing.T) { inEveryMode(t, conformanceAsyncEvents) }

func conformanceAsyncEvents(t *testing.T, e *confEnv) {
	cases := []struct {
		name   string
		access ibv.Access
		mod    func(wr *vrdma.SendWR)
		event  ibv.EventType
	}{
		{"access error: wrong rkey", 0, func(wr *vrdma.SendWR) { wr.RKey ^= 0x80 }, ibv.EventQPAccessErr},
		{"access error: outside the region", 0, func(wr *vrdma.SendWR) { wr.RemoteAddr += mrSize }, ibv.EventQPAccessErr},
		{"request error: QP access flags", ibv.AccessRemoteRead, func(wr *vrdma.SendWR) {}, ibv.EventQPReqErr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			optsB := vrdma.DefaultConnectOptions()
			if c.access != 0 {
				optsB.Access = c.access
			}
			a, b := e.pair(t, pairSpec{typ: ibv.RC, optsB: &optsB})
			wr := vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)},
				RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()}
			c.mod(&wr)
			post(t, a.qp, wr)
			if wc := pollOne(t, a.scq); wc.Status == ibv.WCSuccess {
				t.Fatalf("request succeeded: %+v", wc)
			}
			ev := waitEvent(t, b.dev, c.event, qpEvent(b.qp))
			if ev.CQ != nil || ev.SRQ != nil || ev.Reason == "" {
				t.Fatalf("event %+v", ev)
			}
			if b.qp.State() != ibv.QPSErr {
				t.Fatalf("responder QP in %v after %v", b.qp.State(), ev.Type)
			}
		})
	}
	t.Run("peer process exits", func(t *testing.T) {
		if e.sockB != e.sock {
			t.Skip("across hosts a peer that exits just stops answering: TestConformanceRetryExceeded covers that")
		}
		// A third process (device) on conf-b connects to a, then closes.
		a := e.newSide(t, e.a, qpSpec{})
		o := vrdma.Options{Socket: e.sockB, Instance: "conf-b"}
		d, err := vrdma.Open("vrdma0", o)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		pd, err := d.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		cq, err := d.CreateCQ(16)
		if err != nil {
			t.Fatal(err)
		}
		qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq, Cap: confCap})
		if err != nil {
			t.Fatal(err)
		}
		ep, err := qp.Endpoint(e.mode.gid)
		if err != nil {
			t.Fatal(err)
		}
		if err := qp.Connect(a.endpoint(t), a.connectOptions(nil)); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.Connect(ep, a.connectOptions(nil)); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, a.dev, ibv.EventQPFatal, qpEvent(a.qp))
		if a.qp.State() != ibv.QPSErr {
			t.Fatalf("QP in %v after its peer went away", a.qp.State())
		}
		post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, SGL: []ibv.SGE{a.mr.SGE(0, 8)}})
		checkWC(t, pollOne(t, a.scq), errWC(a, 1, ibv.WCWRFlushErr))
	})
}
