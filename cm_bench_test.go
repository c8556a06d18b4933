package vrdma_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// BenchmarkCMConnect measures connection setup through the connection
// manager: one Dial and the listener's Accept, until both QPs are in RTS
// (REQ, REP, RTU, and three modify_qp on each side). The disconnection and
// the reset of both QPs between connections are not timed. conn/s is the
// setup rate one requester gets, one connection at a time.
//
//	go test -run '^$' -bench CMConnect -benchtime 2s .
func BenchmarkCMConnect(b *testing.B) {
	b.Run("same-host", func(b *testing.B) {
		e := sameHostEnv(b)
		benchConnect(b, e, gidAddr(b, e.b, 0))
	})
	b.Run("two-hosts", func(b *testing.B) { // CM MADs on QP1 over the link
		h := newCMHosts(b, ibv.MTU1024)
		benchConnect(b, h.env(b), h.addrs[1])
	})
}

func benchConnect(b *testing.B, e *confEnv, addr netip.Addr) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	x, y := newSide(b, e.a, qpSpec{}), newSide(b, e.b, qpSpec{})
	l := listen(b, e.b, 0)
	conns := make(chan *vrdma.Conn)
	errs := make(chan error, 1)
	go func() {
		for {
			req, err := l.Accept(ctx)
			if err != nil {
				return
			}
			c, err := req.Accept(ctx, y.qp, nil)
			if err != nil {
				errs <- err
				return
			}
			conns <- c
		}
	}()
	reset := func(qp *vrdma.QP) {
		if err := qp.Modify(&ibv.QPAttr{State: ibv.QPSReset}, ibv.AttrState); err != nil {
			b.Fatal(err)
		}
	}
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		ca, err := e.a.Dial(ctx, x.qp, addr, l.Port(), nil)
		if err != nil {
			b.Fatal(err)
		}
		var cb *vrdma.Conn
		select {
		case cb = <-conns:
		case err := <-errs:
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		if err := ca.Disconnect(ctx, nil); err != nil {
			b.Fatal(err)
		}
		<-cb.Done()
		reset(x.qp)
		reset(y.qp)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N)/total.Seconds(), "conn/s")
}
