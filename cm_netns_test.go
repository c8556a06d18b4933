package vrdma_test

// The connection manager between two namespace hosts with Soft-RoCE links
// on a veth pair: the daemons speak IBTA CM MADs on QP1 over real UDP,
// over the IPv4 and the IPv6 link-local GID, clean and under nftables loss
// (REQ, REP, RTU, DREQ and DREP lost and sent again). Needs root; skipped
// otherwise.

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

func TestCMNetnsHosts(t *testing.T) {
	top, _, e := netnsHosts(t)
	for _, g := range []struct {
		name string
		addr netip.Addr
	}{{"IPv4", top.Hosts[1].IPv4}, {"IPv6 link-local", top.Hosts[1].IPv6LL}} {
		t.Run(g.name, func(t *testing.T) {
			a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
			ca, cb := cmConnect(t, a, b, g.addr)
			if p, reason := ca.Path(); p != "rdma" {
				t.Fatalf("path %q (%s), want rdma", p, reason)
			}
			rcWorkload(t, a, b, 3)
			if err := ca.Disconnect(cmCtx(t), []byte("bye")); err != nil {
				t.Fatal(err)
			}
			<-cb.Done()
			if !samePrivate(cb.DisconnectData(), "bye") {
				t.Fatalf("disconnection data %q", cb.DisconnectData())
			}
		})
	}
	// The setup rate (a measurement, logged: nothing depends on it): one
	// Dial and Accept until both QPs are in RTS, one connection at a time;
	// the disconnection and the QPs' reset are not counted.
	t.Run("setup rate", func(t *testing.T) {
		const n = 50
		x, y := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
		var total time.Duration
		for range n {
			start := time.Now()
			ca, cb := cmConnect(t, x, y, top.Hosts[1].IPv4)
			total += time.Since(start)
			if err := ca.Disconnect(cmCtx(t), nil); err != nil {
				t.Fatal(err)
			}
			<-cb.Done()
			for _, q := range []*vrdma.QP{x.qp, y.qp} {
				if err := q.Modify(&ibv.QPAttr{State: ibv.QPSReset}, ibv.AttrState); err != nil {
					t.Fatal(err)
				}
			}
		}
		t.Logf("%d connections over RoCEv2 between namespace hosts: %.0f µs each, %.0f conn/s", n, float64(total.Microseconds())/n, n/total.Seconds())
	})
	const loss = 20
	t.Run(fmt.Sprintf("under %d%% loss", loss), func(t *testing.T) {
		top.Hosts[0].SetLoss(t, loss)
		top.Hosts[1].SetLoss(t, loss)
		defer top.Hosts[0].SetLoss(t, 0)
		defer top.Hosts[1].SetLoss(t, 0)
		for i := range 4 {
			a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard: each loss costs a retransmission interval (~1.2 s)
			l := listen(t, b.dev, 0)
			got := acceptOne(ctx, l, b.qp, []byte("welcome"))
			ca, err := a.dev.Dial(ctx, a.qp, top.Hosts[1].IPv4, l.Port(), []byte("hello"))
			if err != nil {
				cancel()
				t.Fatalf("connection %d: %v", i, err)
			}
			r := <-got
			if r.err != nil {
				cancel()
				t.Fatalf("connection %d: accept: %v", i, r.err)
			}
			if err := ca.Disconnect(ctx, nil); err != nil {
				cancel()
				t.Fatalf("connection %d: disconnect: %v", i, err)
			}
			select {
			case <-r.conn.Done():
			case <-ctx.Done():
				t.Fatalf("connection %d: the listener never heard of the disconnection", i)
			}
			cancel()
		}
		if top.Hosts[0].Dropped(t)+top.Hosts[1].Dropped(t) == 0 {
			t.Fatal("nothing was dropped: the test tested no loss")
		}
	})
}
