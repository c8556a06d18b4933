package daemon

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestAnsweringQPN: a request on the device's CM is answered by a QP of
// the type that answers it, as the software CM checks: a SIDR request by
// a UD QP, an RC request by an RC QP; the other type, or no such QP, is
// refused saying which.
func TestAnsweringQPN(t *testing.T) {
	h := engine.NewHost()
	t.Cleanup(h.Close)
	a := engine.NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(a)
	pd := a.NewPD()
	cq, err := engine.NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	s := &session{qps: map[uint32]*engine.QP{}}
	for h, typ := range map[uint32]abi.QPType{1: abi.QPTypeRC, 2: abi.QPTypeUD} {
		q, err := engine.NewQP(engine.QPConfig{PD: pd, Type: typ, SendCQ: cq, RecvCQ: cq,
			Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(q.Destroy)
		s.qps[h] = q
	}
	for _, tt := range []struct {
		qp   uint32
		want abi.QPType
		code proto.Code
	}{
		{1, abi.QPTypeRC, proto.CodeOK},
		{2, abi.QPTypeUD, proto.CodeOK},
		{1, abi.QPTypeUD, proto.CodeInvalid},
		{2, abi.QPTypeRC, proto.CodeInvalid},
		{3, abi.QPTypeUD, proto.CodeNotFound},
	} {
		n, err := s.answeringQPN(tt.qp, tt.want)
		got := proto.CodeOK
		if err != nil {
			got = proto.CodeOf(err)
		}
		if got != tt.code {
			t.Errorf("QP %d answering a %v request: %v (%v), want code %v", tt.qp, tt.want, got, err, tt.code)
			continue
		}
		if err == nil && n != s.qps[tt.qp].QPN() {
			t.Errorf("QP %d: number %#x, want %#x", tt.qp, n, s.qps[tt.qp].QPN())
		}
	}
}
