package engine

import (
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
)

// xrcScene is one adapter with two XRC domains: an initiator connected to
// a target of domain 1, an XRC SRQ in each domain (on their own CQs), and
// a registered region.
type xrcScene struct {
	ini, tgt   *QP
	d1, d2     *XRCD
	s1, s2     *RQ
	c1, c2, sc *CQ
	mr         *MR
	mem        []byte
}

func newXRCScene(t *testing.T) *xrcScene {
	t.Helper()
	h := NewHost()
	t.Cleanup(h.Close)
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 7}, false)
	h.AddAdapter(a)
	pd := a.NewPD()
	f := &xrcScene{d1: NewXRCD(a), d2: NewXRCD(a)}
	var err error
	for _, c := range []**CQ{&f.c1, &f.c2, &f.sc} {
		if *c, err = NewCQ(16); err != nil {
			t.Fatal(err)
		}
	}
	if f.s1, err = NewXRCSRQ(pd, f.d1, f.c1, 8, 1); err != nil {
		t.Fatal(err)
	}
	if f.s2, err = NewXRCSRQ(pd, f.d2, f.c2, 8, 1); err != nil {
		t.Fatal(err)
	}
	if f.tgt, err = NewQP(QPConfig{Type: abi.QPTypeXRCRecv, XRCD: f.d1, Events: &events{}}); err != nil {
		t.Fatal(err)
	}
	if f.ini, err = NewQP(QPConfig{PD: pd, Type: abi.QPTypeXRCSend, SendCQ: f.sc, Events: &events{},
		Caps: proto.QPCaps{MaxSendWR: 8, MaxSendSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	region, err := shm.NewRegion("xrc", 8192)
	if err != nil {
		t.Fatal(err)
	}
	f.mem = region.Bytes()
	if f.mr, err = RegisterMR(pd, region, 0x10000, 8192, abi.AccessLocalWrite|abi.AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	gid := a.GIDs()[0]
	for _, c := range []struct {
		q, to *QP
		rtr   qpstate.Mask
		rts   qpstate.Mask
	}{
		{f.tgt, f.ini, qpstate.MaskMaxDestRdAtomic | qpstate.MaskMinRNRTimer, 0},
		{f.ini, f.tgt, 0, qpstate.MaskRetryCnt | qpstate.MaskRNRRetry | qpstate.MaskMaxQPRdAtomic},
	} {
		steps := []struct {
			attr qpstate.Attr
			mask qpstate.Mask
		}{
			{qpstate.Attr{State: abi.QPStateInit, PortNum: 1, AccessFlags: abi.AccessRemoteWrite},
				qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskAccessFlags},
			{qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DGID: gid, PortNum: 1}, PathMTU: abi.MTU1024, DestQPN: c.to.QPN(), MaxDestRdAtomic: 1, MinRNRTimer: 1},
				qpstate.MaskState | qpstate.MaskAV | qpstate.MaskPathMTU | qpstate.MaskDestQPN | qpstate.MaskRQPSN | c.rtr},
			{qpstate.Attr{State: abi.QPStateRTS, Timeout: 14, RetryCnt: 0, RNRRetry: 0, MaxRdAtomic: 1},
				qpstate.MaskState | qpstate.MaskTimeout | qpstate.MaskSQPSN | c.rts},
		}
		for _, s := range steps {
			if _, err := c.q.Modify(&s.attr, s.mask); err != nil {
				t.Fatalf("%v QP to %v: %v", c.q.Type(), s.attr.State, err)
			}
		}
	}
	return f
}

// postSRQ posts a receive of the region's second half to r.
func (f *xrcScene) postSRQ(t *testing.T, r *RQ, id uint64) {
	t.Helper()
	i := shm.Load32(r.mem, r.ring.Offset+abi.RingProdOff)
	off := r.ring.Entry(i)
	if err := abi.PutRecvWQE(r.mem[off:off+r.ring.Stride], id, []abi.SGE{{Addr: 0x10000 + 4096, Length: 4096, LKey: f.mr.Key()}}); err != nil {
		t.Fatal(err)
	}
	shm.Store32(r.mem, r.ring.Offset+abi.RingProdOff, i+1)
}

// newest returns c's newest completion, if it has more than had.
func newest(c *CQ, had uint32) (abi.CQE, bool) {
	var e abi.CQE
	n := shm.Load32(c.mem, c.ring.Offset+abi.RingProdOff)
	if n == had {
		return e, false
	}
	abi.ParseCQE(c.mem[c.ring.Entry(n-1):], &e)
	return e, true
}

// TestXRCMemcpy runs an XRC initiator's requests on one host: each names
// an XRC SRQ by number; the target receives into it if it is of the
// target's domain (the completion on that SRQ's CQ, with the target's QP
// number), and answers a number of another domain's SRQ, or of none, with
// a remote invalid request (the target goes to ERR).
func TestXRCMemcpy(t *testing.T) {
	tests := []struct {
		name   string
		op     abi.Opcode
		srqn   func(f *xrcScene) uint32
		status abi.Status
		recvOn func(f *xrcScene) *CQ // the CQ a receive completes on; nil: none
	}{
		{"SEND to the domain's SRQ", abi.OpSend, func(f *xrcScene) uint32 { return f.s1.SRQNum() }, abi.StatusSuccess, func(f *xrcScene) *CQ { return f.c1 }},
		{"WRITE_WITH_IMM to the domain's SRQ", abi.OpRDMAWriteImm, func(f *xrcScene) uint32 { return f.s1.SRQNum() }, abi.StatusSuccess, func(f *xrcScene) *CQ { return f.c1 }},
		{"SEND to another domain's SRQ", abi.OpSend, func(f *xrcScene) uint32 { return f.s2.SRQNum() }, abi.StatusRemInvReqErr, nil},
		{"SEND to no SRQ", abi.OpSend, func(f *xrcScene) uint32 { return 0xabcdef }, abi.StatusRemInvReqErr, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newXRCScene(t)
			f.postSRQ(t, f.s1, 71)
			f.postSRQ(t, f.s2, 72)
			copy(f.mem, "xrc payload")
			w := &abi.SendWQE{WRID: 9, Opcode: tt.op, Flags: abi.SendSignaled, RemoteQPN: tt.srqn(f),
				RemoteAddr: 0x10000 + 4096, RKey: f.mr.Key(), Imm: 0x55}
			c := postNext(t, f.ini, w, []abi.SGE{{Addr: 0x10000, Length: 11, LKey: f.mr.Key()}})
			if c.Status != tt.status {
				t.Fatalf("send completion %v, want %v", c.Status, tt.status)
			}
			r1, got1 := newest(f.c1, 0)
			_, got2 := newest(f.c2, 0)
			if got2 {
				t.Error("the other domain's SRQ received a message")
			}
			if tt.recvOn == nil {
				if got1 {
					t.Error("the domain's SRQ received a message it was not named in")
				}
				deadline := time.Now().Add(20 * time.Second)
				for f.tgt.State() != abi.QPStateErr && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if f.tgt.State() != abi.QPStateErr {
					t.Errorf("target in %v after an invalid request, want ERR", f.tgt.State())
				}
				return
			}
			if !got1 || r1.Status != abi.StatusSuccess || r1.WRID != 71 || r1.QPNum != f.tgt.QPN() || r1.SrcQP != f.ini.QPN() {
				t.Fatalf("receive on the SRQ's CQ: %+v (got %v), want WRID 71 on QP 0x%x from 0x%x", r1, got1, f.tgt.QPN(), f.ini.QPN())
			}
			if string(f.mem[4096:4107]) != "xrc payload" {
				t.Errorf("the target region holds %q", f.mem[4096:4107])
			}
		})
	}
}

// TestXRCDomainsCount: a domain is busy while an XRC SRQ or a target QP is
// in it, and free once they are gone; a target has no send queue to run
// and no CQs, an initiator no receive queue.
func TestXRCDomainsCount(t *testing.T) {
	f := newXRCScene(t)
	if !f.d1.Busy() || !f.d2.Busy() {
		t.Fatal("domains with an SRQ are not busy")
	}
	if f.tgt.SendCQ() != nil || f.tgt.SRQ() != nil || f.ini.SRQ() != nil || f.ini.RQ().Entries != 0 {
		t.Error("XRC QPs have queues of their own")
	}
	// A client scribbling on a target's (unused) send ring makes no work.
	f.tgt.step() // what the modifies left for the worker
	shm.Store32(f.tgt.mem, abi.RingProdOff, 5)
	if f.tgt.hasWork() {
		t.Error("a target's send ring makes work")
	}
	f.s1.Close()
	if !f.d1.Busy() {
		t.Error("a domain with a target QP is not busy")
	}
	f.tgt.Destroy()
	if f.d1.Busy() {
		t.Error("an empty domain is busy")
	}
	if f.c1.Busy() {
		t.Error("the CQ of a closed XRC SRQ is still in use")
	}
	if r := f.ini.adapter.xsrqs.lookup(f.s1.SRQNum()); r != nil {
		t.Error("a closed SRQ's number still names it")
	}
	if _, err := NewQP(QPConfig{Type: abi.QPTypeXRCRecv, Events: &events{}}); err == nil {
		t.Error("a target without a domain was created")
	}
	if _, err := NewQP(QPConfig{PD: f.ini.PD(), Type: abi.QPTypeXRCSend, SendCQ: f.sc, SRQ: f.s2}); err == nil {
		t.Error("an initiator with an SRQ was created")
	}
	if _, err := NewQP(QPConfig{PD: f.ini.PD(), Type: abi.QPTypeRC, SendCQ: f.sc, RecvCQ: f.sc, SRQ: f.s2,
		Caps: proto.QPCaps{MaxSendWR: 1, MaxSendSGE: 1}}); err == nil {
		t.Error("an RC QP on an XRC SRQ was created")
	}
}
