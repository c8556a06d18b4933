package engine

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
)

// TestDeviceErrOnItsOwn: a device QP that enters ERR on its own (here a
// send that exhausted its retries) may be handed receives before its error
// completion reaches the engine; rxe keeps a receive posted to a QP in ERR
// and never completes it. Once the engine learns of the error it moves the
// device QP to ERR itself, a transition that makes the device flush what
// it holds, so that receive completes with WR_FLUSH_ERR instead of never.
func TestDeviceErrOnItsOwn(t *testing.T) {
	for _, tt := range []struct {
		name   string
		report func(x *faultFixture)
	}{
		{"error completion", func(x *faultFixture) {
			x.f.handler(1, []verbs.WC{{WRID: x.sendID(2), Opcode: verbs.WCRDMAWrite, Status: verbs.WCRetryExcErr, QPN: x.q.QPN()}})
		}},
		{"QP fatal event", func(x *faultFixture) {
			x.f.event(verbs.AsyncEvent{Type: verbs.EventQPFatal, Element: x.q.dev.qp.Handle, QPN: x.q.QPN()})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := newFaultFixture(t)
			// As rxe: the QP is in ERR on the device; a move to ERR flushes
			// the receives it was handed meanwhile (pushed, as the helper
			// pushes them, from another goroutine).
			x.f.mu.Lock()
			x.f.errQPs[x.q.dev.qp.Handle] = true
			x.f.atModify = func(va verbs.QPAttr) {
				if va.State != uint32(abi.QPStateErr) {
					return
				}
				x.f.mu.Lock()
				late := x.f.lateRecvs
				x.f.lateRecvs = nil
				x.f.mu.Unlock()
				wcs := make([]verbs.WC, len(late))
				for i, r := range late {
					wcs[i] = verbs.WC{WRID: r.WRID, Opcode: verbs.WCRecv, Status: verbs.WCWRFlushErr, QPN: x.q.QPN()}
				}
				go x.f.handler(1, wcs)
			}
			x.f.mu.Unlock()

			// The client posts a receive before the engine knows.
			const wrid = 52
			rq := x.q.RQ()
			if err := abi.PutRecvWQE(x.q.mem[rq.Entry(2):rq.Entry(2)+rq.Stride], wrid, []abi.SGE{{Addr: 0x10000, Length: 64, LKey: x.lkey}}); err != nil {
				t.Fatal(err)
			}
			shm.Store32(x.q.mem, rq.Offset+abi.RingProdOff, 3)
			x.q.kickWorker()
			waitFor(t, "the receive handed to the device QP in ERR", func() bool {
				x.f.mu.Lock()
				defer x.f.mu.Unlock()
				return len(x.f.lateRecvs) == 1
			})

			tt.report(x)
			waitFor(t, "WR_FLUSH_ERR completion of the receive the device QP in ERR was handed", func() bool {
				for _, c := range x.completions() {
					if c.WRID == wrid {
						if c.Status != abi.StatusWRFlushErr || c.Opcode != abi.WCRecv {
							t.Fatalf("the receive completed with %+v, want WR_FLUSH_ERR", c)
						}
						return true
					}
				}
				return false
			})
			if got := x.q.State(); got != abi.QPStateErr {
				t.Fatalf("the QP is %v, want ERR", got)
			}
		})
	}
}
