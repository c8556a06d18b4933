package engine

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestFootprint: what QPBytes, CQBytes and SRQBytes say a queue takes,
// before it exists, is what the queue says once created (the daemon gives
// back what it charged), and covers its shared region and, per send
// request, the wire path's state with a buffer of the QP's inline data; capabilities
// a QP cannot have are refused, not computed.
func TestFootprint(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	pd := a.NewPD()
	cq, err := NewCQ(MaxCQE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	if got, want := cq.Footprint(), CQBytes(MaxCQE); got != want || got < MaxCQE*abi.CQESize {
		t.Errorf("CQ of %d: footprint %d, CQBytes %d", MaxCQE, got, want)
	}
	srq, err := NewSRQ(pd, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srq.Close)
	if got, want := srq.Footprint(), SRQBytes(100, 3); got != want || got < uint64(srq.Size()) {
		t.Errorf("SRQ: footprint %d, SRQBytes %d, ring region %d", got, want, srq.Size())
	}
	for _, tc := range []struct {
		name string
		caps proto.QPCaps
		srq  bool
		ok   bool
	}{
		{"smallest", proto.QPCaps{}, false, true},
		{"perftest", proto.QPCaps{MaxSendWR: 128, MaxRecvWR: 512, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 220}, false, true},
		{"largest", proto.QPCaps{MaxSendWR: MaxQPWR, MaxRecvWR: MaxQPWR, MaxSendSGE: MaxSGE, MaxRecvSGE: MaxSGE, MaxInlineData: MaxInline}, false, true},
		{"srq", proto.QPCaps{MaxSendWR: 1000, MaxSendSGE: 2}, true, true},
		{"too many WRs", proto.QPCaps{MaxSendWR: 1 << 40}, false, false},
		{"negative", proto.QPCaps{MaxRecvWR: -5}, false, false},
		{"too many SGEs", proto.QPCaps{MaxRecvSGE: MaxSGE + 1}, false, false},
	} {
		n, err := QPBytes(tc.caps, tc.srq)
		if (err == nil) != tc.ok {
			t.Errorf("%s: QPBytes = %d, %v; want ok=%v", tc.name, n, err, tc.ok)
			continue
		}
		if err != nil {
			continue
		}
		cfg := QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{}, Caps: tc.caps}
		if tc.srq {
			cfg.SRQ = srq
		}
		q, err := NewQP(cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c := q.Caps()
		floor := uint64(q.Size()) + uint64(c.MaxSendWR)*uint64(c.MaxInlineData+c.MaxSendSGE*8)
		if q.Footprint() != n || n < floor {
			t.Errorf("%s: QPBytes %d, footprint %d, want equal and at least %d (region %d)", tc.name, n, q.Footprint(), floor, q.Size())
		}
		t.Logf("%s: %d bytes (%d shared)", tc.name, n, q.Size())
		q.Destroy()
	}
}

// TestInlineGrantedIsAccepted: a QP gets at least the inline data it asks
// for, and what it gets is accepted when asked for again. libfabric's verbs
// provider finds the most a device takes, then creates its QPs with what
// the test QP reported: before, asking 256 granted 448 and asking 448 was
// refused ("max_inline_data 448 must be 0..256", fi_pingpong -e dgram).
func TestInlineGrantedIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		inline, sge int
	}{
		{0, 1}, {1, 1}, {64, 3}, {220, 1}, {256, 1}, {400, 1}, {448, 1}, {449, 2}, {MaxInline - 1, 1},
		{MaxInline, 1}, {MaxInline, MaxSGE}, {0, MaxSGE}, {100, MaxSGE},
	} {
		sh, err := shapeQP(proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: tc.sge, MaxRecvSGE: 1, MaxInlineData: tc.inline}, false)
		if err != nil {
			t.Errorf("inline %d, %d SGEs: %v", tc.inline, tc.sge, err)
			continue
		}
		got := sh.caps.MaxInlineData
		if got < tc.inline || got > MaxInline {
			t.Errorf("inline %d, %d SGEs: granted %d, want %d..%d", tc.inline, tc.sge, got, tc.inline, MaxInline)
		}
		again, err := shapeQP(proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: tc.sge, MaxRecvSGE: 1, MaxInlineData: got}, false)
		if err != nil || again.caps.MaxInlineData != got {
			t.Errorf("inline %d, %d SGEs: asking again for the %d granted: %d, %v", tc.inline, tc.sge, got, again.caps.MaxInlineData, err)
		}
	}
	if _, err := shapeQP(proto.QPCaps{MaxSendWR: 1, MaxInlineData: MaxInline + 1}, false); err == nil {
		t.Errorf("inline %d, past MaxInline, was accepted", MaxInline+1)
	}
}
