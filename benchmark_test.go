package vrdma_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// benchEnds opens two connected RC QPs on two instances of an in-process
// daemon; async selects async-mode adapters.
func benchEnds(b *testing.B, async bool, size int) (qa, qb *vrdma.QP, ma, mb *vrdma.MR, ca, cb *vrdma.CQ) {
	b.Helper()
	sock := daemontest.Start(b)
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { adm.Close() })
	open := func(name string) (*vrdma.QP, *vrdma.MR, *vrdma.CQ) {
		if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: name, Adapters: 1, Async: async}); err != nil {
			b.Fatal(err)
		}
		dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: sock, Instance: name})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { dev.Close() })
		pd, _ := dev.AllocPD()
		mr, err := pd.AllocMR(2*size+64, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|ibv.AccessRemoteRead)
		if err != nil {
			b.Fatal(err)
		}
		cq, _ := dev.CreateCQ(256)
		qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq,
			Cap: vrdma.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
		if err != nil {
			b.Fatal(err)
		}
		return qp, mr, cq
	}
	qa, ma, ca = open("bench-a")
	qb, mb, cb = open("bench-b")
	ea, _ := qa.Endpoint(0)
	eb, _ := qb.Endpoint(0)
	if err := qa.Connect(eb, nil); err != nil {
		b.Fatal(err)
	}
	if err := qb.Connect(ea, nil); err != nil {
		b.Fatal(err)
	}
	return
}

// BenchmarkRDMAWrite posts signaled RDMA WRITEs, 32 in flight, and reaps
// their completions: bandwidth, and allocations per operation (the data path
// must not allocate).
func BenchmarkRDMAWrite(b *testing.B) {
	for _, async := range []bool{false, true} {
		for _, size := range []int{8, 64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("async=%v/size=%d", async, size), func(b *testing.B) {
				qa, _, ma, mb, ca, _ := benchEnds(b, async, size)
				wr := []vrdma.SendWR{{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
					SGL: []ibv.SGE{ma.SGE(0, size)}, RemoteAddr: mb.Addr(), RKey: mb.RKey()}}
				wc := make([]vrdma.WorkCompletion, 64)
				ctx := context.Background()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				out := 0
				for i := 0; i < b.N; i++ {
					for out >= 32 {
						n, err := ca.PollWait(ctx, wc, 1000)
						if err != nil {
							b.Fatal(err)
						}
						out -= n
					}
					if err := qa.PostSend(wr); err != nil {
						b.Fatal(err)
					}
					out++
				}
				for out > 0 {
					n, err := ca.PollWait(ctx, wc, 1000)
					if err != nil {
						b.Fatal(err)
					}
					out -= n
				}
			})
		}
	}
}

// BenchmarkSendPingPong is rc_lat: one goroutine plays both ends of an
// 8-byte SEND ping-pong; ns/op is one round trip.
func BenchmarkSendPingPong(b *testing.B) {
	for _, async := range []bool{false, true} {
		b.Run(fmt.Sprintf("async=%v", async), func(b *testing.B) {
			qa, qb, ma, mb, ca, cb := benchEnds(b, async, 8)
			rwa := []vrdma.RecvWR{{SGL: []ibv.SGE{ma.SGE(64, 8)}}}
			rwb := []vrdma.RecvWR{{SGL: []ibv.SGE{mb.SGE(64, 8)}}}
			for i := 0; i < 32; i++ {
				if qa.PostRecv(rwa) != nil || qb.PostRecv(rwb) != nil {
					b.Fatal("post_recv")
				}
			}
			ab := []vrdma.SendWR{{Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{ma.SGE(0, 8)}}}
			ba := []vrdma.SendWR{{Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{mb.SGE(0, 8)}}}
			wc := make([]vrdma.WorkCompletion, 4)
			ctx := context.Background()
			// Each side sees its send completion and the peer's message on one CQ.
			hop := func(tx *vrdma.QP, txcq *vrdma.CQ, wr []vrdma.SendWR, rx *vrdma.QP, rxcq *vrdma.CQ, rw []vrdma.RecvWR) {
				if err := tx.PostSend(wr); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < 2; {
					cq := rxcq
					if got == 1 && rxcq != txcq {
						cq = txcq
					}
					n, err := cq.PollWait(ctx, wc[:1], 100000)
					if err != nil || wc[0].Status != ibv.WCSuccess {
						b.Fatal(err, wc[0].Status)
					}
					if wc[0].Opcode == ibv.WCRecv {
						if err := rx.PostRecv(rw); err != nil {
							b.Fatal(err)
						}
					}
					got += n
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				hop(qa, ca, ab, qb, cb, rwb)
				hop(qb, cb, ba, qa, ca, rwa)
			}
		})
	}
}
