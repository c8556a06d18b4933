package vrdma_test

import (
	"context"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/fakelink"
)

// The RoCEv2 path end to end in one process: library, two daemons, the
// transport, the wire codec, and an in-process link that copies each frame
// once (no kernel). allocs/op is the whole stack's per message.

// BenchmarkWireRDMAWrite streams 8 KiB RDMA WRITEs (two packets at an MTU
// of 4096), 16 in flight.
func BenchmarkWireRDMAWrite(b *testing.B) {
	const size, depth = 8 << 10, 16
	w := newWireHosts(b, fakelink.New(1), ibv.MTU4096)
	x, y := hostPair(b, w.open(b), ibv.RC, 1, 7)
	wr := []vrdma.SendWR{{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{x.mr.SGE(0, size)},
		RemoteAddr: y.mr.Addr() + rdmaOff, RKey: y.mr.RKey()}}
	wc := make([]vrdma.WorkCompletion, depth)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.SetBytes(int64(wr[0].SGL[0].Length))
	b.ReportAllocs()
	b.ResetTimer()
	out := 0
	for i := 0; i < b.N; i++ {
		for out >= depth {
			n, err := x.scq.PollWait(ctx, wc, 1000)
			if err != nil {
				b.Fatal(err)
			}
			out -= n
		}
		if err := x.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		out++
	}
	for out > 0 {
		n, err := x.scq.PollWait(ctx, wc, 1000)
		if err != nil {
			b.Fatal(err)
		}
		out -= n
	}
}

// BenchmarkWireSendPingPong bounces an 8-byte SEND between the two hosts:
// one op is one round trip.
func BenchmarkWireSendPingPong(b *testing.B) {
	w := newWireHosts(b, fakelink.New(1), ibv.MTU1024)
	x, y := hostPair(b, w.open(b), ibv.RC, 1, 7)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	send := func(s *side) []vrdma.SendWR {
		return []vrdma.SendWR{{Opcode: ibv.WRSend, SGL: []ibv.SGE{s.mr.SGE(srcOff, 8)}}}
	}
	recv := func(s *side) []vrdma.RecvWR {
		return []vrdma.RecvWR{{SGL: []ibv.SGE{s.mr.SGE(recvOff, 64)}}}
	}
	xs, ys, xr, yr := send(x), send(y), recv(x), recv(y)
	wc := make([]vrdma.WorkCompletion, 4)
	await := func(cq *vrdma.CQ) {
		if _, err := cq.PollWait(ctx, wc[:1], 1<<20); err != nil {
			b.Fatal(err)
		}
		if err := wc[0].Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []struct {
		s *side
		r []vrdma.RecvWR
	}{{x, xr}, {y, yr}} {
		if err := q.s.qp.PostRecv(q.r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := x.qp.PostSend(xs); err != nil {
			b.Fatal(err)
		}
		await(y.rcq)
		if err := y.qp.PostRecv(yr); err != nil {
			b.Fatal(err)
		}
		if err := y.qp.PostSend(ys); err != nil {
			b.Fatal(err)
		}
		await(x.rcq)
		if err := x.qp.PostRecv(xr); err != nil {
			b.Fatal(err)
		}
	}
}
