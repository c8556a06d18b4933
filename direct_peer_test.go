package vrdma_test

import (
	"bytes"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// TestDirectPathEndsWithThePeerQP: once the responder QP is destroyed, has
// left a receiving state or no longer grants remote writes, a WRITE through
// a mapping the initiator cached while it did must not reach the region,
// which is still registered. It completes as on the daemon's path — the
// untrusting pair, run alongside, says what that is: RETRY_EXC_ERR for a
// responder that no longer answers (destroyed, ERR, RESET: IBTA's
// responder drops what reaches a QP in those states, and the requester's
// retries run out), REM_INV_REQ_ERR for one whose access flags refuse the
// operation — and the initiator QP goes to ERR.
func TestDirectPathEndsWithThePeerQP(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, b *directEnd)
		want   ibv.Status
	}{
		{"peer QP destroyed", func(t *testing.T, b *directEnd) {
			if err := b.qp.Destroy(); err != nil {
				t.Fatal(err)
			}
		}, ibv.WCRetryExcErr},
		{"peer QP moved to ERR", func(t *testing.T, b *directEnd) {
			if err := b.qp.Modify(&ibv.QPAttr{State: ibv.QPSErr}, ibv.AttrState); err != nil {
				t.Fatal(err)
			}
		}, ibv.WCRetryExcErr},
		{"peer QP moved to RESET", func(t *testing.T, b *directEnd) {
			if err := b.qp.Modify(&ibv.QPAttr{State: ibv.QPSReset}, ibv.AttrState); err != nil {
				t.Fatal(err)
			}
		}, ibv.WCRetryExcErr},
		{"peer QP no longer grants remote write", func(t *testing.T, b *directEnd) {
			if err := b.qp.Modify(&ibv.QPAttr{State: ibv.QPSRTS, AccessFlags: ibv.AccessRemoteRead}, ibv.AttrState|ibv.AttrAccessFlags); err != nil {
				t.Fatal(err)
			}
		}, ibv.WCRemInvReqErr},
	}
	for _, tt := range tests {
		for _, group := range []string{"", "g"} {
			path := "daemon's path"
			if group != "" {
				path = "direct path"
			}
			t.Run(tt.name+"/"+path, func(t *testing.T) {
				a, b := directPair(t, group, directAccess)
				wr := vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
				before := a.daemonMessages(t)
				if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil { // maps the region
					t.Fatal(err)
				}
				if wc := a.completion(t); wc.Status != ibv.WCSuccess {
					t.Fatalf("first write: %+v", wc)
				}
				if n := a.daemonMessages(t) - before; group != "" && n != 0 {
					t.Fatalf("the first write went through the daemon (%d messages): the test needs the direct path", n)
				}
				tt.change(t, b)
				copy(a.mr.Bytes(), "must not land")
				target := append([]byte(nil), b.mr.Bytes()...)
				wr.ID = 2
				if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
					t.Fatal(err)
				}
				if wc := a.completion(t); wc.Status != tt.want || wc.ID != 2 {
					t.Fatalf("write after the change: %+v (%v), want %v", wc, wc.Status, tt.want)
				}
				if !bytes.Equal(target, b.mr.Bytes()) {
					t.Fatal("the write reached the peer's region")
				}
				if st := a.qp.State(); st != ibv.QPSErr {
					t.Fatalf("initiator QP in %v after the error completion, want ERR", st)
				}
			})
		}
	}
}
