package engine

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestQPReceiveQueueCaps: a QP without a shared receive queue may ask for
// no receive requests (rdma_rxe allows it, qperf's senders do it) and gets
// the smallest queue; a negative count or one past the limit is refused.
func TestQPReceiveQueueCaps(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 8}, false)
	pd := a.NewPD()
	cq, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	for _, tc := range []struct {
		recvWR  int
		ok      bool
		entries int
	}{
		{0, true, 1}, // was refused before
		{1, true, 1},
		{5, true, 8},
		{-1, false, 0},
		{MaxQPWR + 1, false, 0},
	} {
		q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{},
			Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: tc.recvWR, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if (err == nil) != tc.ok {
			t.Fatalf("max_recv_wr %d: err = %v, want ok=%v", tc.recvWR, err, tc.ok)
		}
		if err != nil {
			continue
		}
		if got := q.RQ().Entries; got != tc.entries {
			t.Errorf("max_recv_wr %d: receive ring of %d entries, want %d", tc.recvWR, got, tc.entries)
		}
		q.Destroy()
	}
}
