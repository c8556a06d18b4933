package vrdma_test

import (
	"context"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/vrdma/vrdma/ibv"
)

// After connections made, refused, timed out and ended between two
// daemons, and the daemons stopped, no goroutine is left: not the
// connection manager's readers, writers, dialers or timers.
func TestCMNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("connections", func(t *testing.T) {
		h := newCMHosts(t, ibv.MTU1024)
		e := h.env(t)
		for i := 0; i < 3; i++ {
			a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
			ca, _ := cmConnect(t, a, b, h.addrs[1])
			if err := ca.Disconnect(cmCtx(t), nil); err != nil {
				t.Fatal(err)
			}
		}
		a := newSide(t, e.a, qpSpec{})
		if _, err := e.a.Dial(cmCtx(t), a.qp, h.addrs[1], 9, nil); err == nil {
			t.Fatal("a dial to a port nobody listens on succeeded")
		}
		l := listen(t, e.b, 0)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := e.a.Dial(ctx, a.qp, h.addrs[1], l.Port(), nil); err == nil {
			t.Fatal("a dial nobody accepts succeeded")
		}
		// An established connection left for the daemons' shutdown.
		x, y := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
		cmConnect(t, x, y, h.addrs[1])
		_, _ = e.a.Dial(cmCtx(t), newSide(t, e.a, qpSpec{}).qp, netip.MustParseAddr("10.0.0.77"), 1, nil)
	})
	deadline := time.Now().Add(confTimeout)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
