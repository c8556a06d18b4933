package engine

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
)

// connectedPair returns two RC QPs on one trusting adapter, connected to
// each other and in RTS: x the initiator, y its responder.
func connectedPair(t *testing.T) (x, y *QP) {
	t.Helper()
	h := NewHost()
	t.Cleanup(h.Close)
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(a)
	pd := a.NewPD()
	cq, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	mk := func() *QP {
		q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{},
			Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	x, y = mk(), mk()
	gid := a.GIDs()[0]
	for _, c := range []struct{ q, to *QP }{{x, y}, {y, x}} {
		steps := []struct {
			attr qpstate.Attr
			mask qpstate.Mask
		}{
			{qpstate.Attr{State: abi.QPStateInit, PortNum: 1, AccessFlags: abi.AccessRemoteWrite | abi.AccessRemoteRead},
				qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskAccessFlags},
			{qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DGID: gid, PortNum: 1}, PathMTU: abi.MTU1024, DestQPN: c.to.QPN(), MaxDestRdAtomic: 1, MinRNRTimer: 12},
				qpstate.MaskState | qpstate.MaskAV | qpstate.MaskPathMTU | qpstate.MaskDestQPN | qpstate.MaskRQPSN | qpstate.MaskMaxDestRdAtomic | qpstate.MaskMinRNRTimer},
			{qpstate.Attr{State: abi.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
				qpstate.MaskState | qpstate.MaskTimeout | qpstate.MaskRetryCnt | qpstate.MaskRNRRetry | qpstate.MaskSQPSN | qpstate.MaskMaxQPRdAtomic},
		}
		for _, s := range steps {
			if _, err := c.q.Modify(&s.attr, s.mask); err != nil {
				t.Fatalf("QP 0x%x to %v: %v", c.q.QPN(), s.attr.State, err)
			}
		}
	}
	if !x.Direct() {
		t.Fatal("the initiator has no direct path: the test needs one")
	}
	return x, y
}

// TestPeerChangeRevokesInitiators: whatever makes the responder QP stop
// answering (destroyed; ERR by a modify or by the engine; RESET), or
// changes what it grants (its access flags), bumps the revoke word of the
// initiator connected to it, so that the library drops the mappings it
// cached and sends its next request to the daemon. A modify that changes
// neither leaves the mappings alone.
func TestPeerChangeRevokesInitiators(t *testing.T) {
	modify := func(attr qpstate.Attr, mask qpstate.Mask) func(t *testing.T, y *QP) {
		return func(t *testing.T, y *QP) {
			if _, err := y.Modify(&attr, mask); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name   string
		change func(t *testing.T, y *QP)
		revoke bool
		direct bool // the initiator still has a direct path afterwards
	}{
		{"destroyed", func(_ *testing.T, y *QP) { y.Destroy() }, true, false},
		{"modified to ERR", modify(qpstate.Attr{State: abi.QPStateErr}, qpstate.MaskState), true, false},
		{"failed by the engine", func(_ *testing.T, y *QP) { y.Fail(abi.EventQPFatal, "test") }, true, false},
		{"modified to RESET", modify(qpstate.Attr{State: abi.QPStateReset}, qpstate.MaskState), true, false},
		{"access narrowed", modify(qpstate.Attr{State: abi.QPStateRTS, AccessFlags: abi.AccessRemoteRead}, qpstate.MaskState|qpstate.MaskAccessFlags), true, true},
		{"access unchanged", modify(qpstate.Attr{State: abi.QPStateRTS, AccessFlags: abi.AccessRemoteWrite | abi.AccessRemoteRead, MinRNRTimer: 3}, qpstate.MaskState|qpstate.MaskAccessFlags|qpstate.MaskMinRNRTimer), false, true},
		{"to SQD", modify(qpstate.Attr{State: abi.QPStateSQD}, qpstate.MaskState), false, true}, // SQD still receives
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, y := connectedPair(t)
			defer x.Destroy()
			if tt.name != "destroyed" {
				defer y.Destroy()
			}
			before := shm.Load32(x.mem, abi.QPRevokeOff)
			tt.change(t, y)
			if got := shm.Load32(x.mem, abi.QPRevokeOff) != before; got != tt.revoke {
				t.Errorf("revoked %v, want %v", got, tt.revoke)
			}
			if got := x.Direct(); got != tt.direct {
				t.Errorf("Direct() = %v afterwards, want %v", got, tt.direct)
			}
			if x.State() != abi.QPStateRTS {
				t.Errorf("the initiator went to %v: the responder's change is the requester's to find out", x.State())
			}
		})
	}
}
