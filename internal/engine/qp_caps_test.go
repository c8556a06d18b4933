package engine

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestQPQueueCaps: a QP without a shared receive queue may ask for no
// receive requests, and any QP for no send requests (rdma_rxe allows both,
// qperf does it), and gets the smallest queue; a negative count or one past
// the limit is refused.
func TestQPQueueCaps(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 8}, false)
	pd := a.NewPD()
	cq, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	for _, tc := range []struct {
		sendWR, recvWR int
		ok             bool
		sq, rq         int // ring entries
	}{
		{4, 0, true, 4, 1}, // both were refused before
		{0, 4, true, 1, 4},
		{4, 1, true, 4, 1},
		{4, 5, true, 4, 8},
		{4, -1, false, 0, 0},
		{-1, 4, false, 0, 0},
		{4, MaxQPWR + 1, false, 0, 0},
		{MaxQPWR + 1, 4, false, 0, 0},
	} {
		q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{},
			Caps: proto.QPCaps{MaxSendWR: tc.sendWR, MaxRecvWR: tc.recvWR, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if (err == nil) != tc.ok {
			t.Fatalf("max_send_wr %d, max_recv_wr %d: err = %v, want ok=%v", tc.sendWR, tc.recvWR, err, tc.ok)
		}
		if err != nil {
			continue
		}
		if sq, rq := q.SQ().Entries, q.RQ().Entries; sq != tc.sq || rq != tc.rq {
			t.Errorf("max_send_wr %d, max_recv_wr %d: rings of %d and %d entries, want %d and %d", tc.sendWR, tc.recvWR, sq, rq, tc.sq, tc.rq)
		}
		q.Destroy()
	}
}
