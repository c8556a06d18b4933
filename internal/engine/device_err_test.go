package engine

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
	"golang.org/x/sys/unix"
)

// TestDeviceRecvPostedAsQPEntersErr: a receive the client posts while its
// QP is being moved to ERR (rping's last receive, posted as rdma_disconnect
// moves the QP to ERR) completes with WR_FLUSH_ERR, and the device QP,
// already in ERR, is not handed it: rxe keeps a receive posted to a QP in
// ERR and never completes it, and rping waited for that flush for ever.
func TestDeviceRecvPostedAsQPEntersErr(t *testing.T) {
	h := NewHost()
	t.Cleanup(h.Close)
	f := &fakeDevice{}
	devGID := [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 15}
	u := NewDeviceUplink("hca0", f, [][16]byte{{0: 0xfe, 1: 0x80, 15: 1}, devGID})
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(a)
	if err := a.Bind(u); err != nil {
		t.Fatal(err)
	}
	pd := a.NewPD()
	cq, err := NewCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	owner, err := shm.NewRegion("owner", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	fd, err := unix.Dup(owner.FD())
	if err != nil {
		t.Fatal(err)
	}
	region, err := shm.MapRegionRange(fd, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	const vaddr = 0x7f0000000000
	mr, err := RegisterMR(pd, region, vaddr, 4096, abi.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Deregister()
	lkey, _ := mr.DeviceKeys()
	q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{},
		Caps: proto.QPCaps{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	for _, s := range []struct {
		attr qpstate.Attr
		mask qpstate.Mask
	}{
		{qpstate.Attr{State: abi.QPStateInit, PortNum: 1}, qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskAccessFlags},
		{qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DGID: devGID, SGIDIndex: 1, HopLimit: 64, PortNum: 1}, PathMTU: abi.MTU1024, DestQPN: 0x1234, MaxDestRdAtomic: 1},
			qpstate.MaskState | qpstate.MaskAV | qpstate.MaskPathMTU | qpstate.MaskDestQPN | qpstate.MaskRQPSN | qpstate.MaskMaxDestRdAtomic | qpstate.MaskMinRNRTimer},
		{qpstate.Attr{State: abi.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			qpstate.MaskState | qpstate.MaskTimeout | qpstate.MaskRetryCnt | qpstate.MaskRNRRetry | qpstate.MaskSQPSN | qpstate.MaskMaxQPRdAtomic},
	} {
		if _, err := q.Modify(&s.attr, s.mask); err != nil {
			t.Fatal(err)
		}
	}

	// As the device's QP enters ERR, the client posts a receive and rings.
	rq := q.RQ()
	const wrid = 200
	f.mu.Lock()
	f.atModify = func(va verbs.QPAttr) {
		if va.State != uint32(abi.QPStateErr) {
			return
		}
		off := rq.Entry(0)
		if err := abi.PutRecvWQE(q.mem[off:off+rq.Stride], wrid, []abi.SGE{{Addr: vaddr, Length: 64, LKey: lkey}}); err != nil {
			t.Error(err)
			return
		}
		shm.Store32(q.mem, rq.Offset+abi.RingProdOff, 1)
		q.kickWorker()
		// The runner may take it now unless the move to ERR holds it off;
		// if it can, let it (the device gets the receive, or it is flushed).
		for i := 0; i < 100; i++ {
			if !q.procMu.TryLock() {
				continue
			}
			q.procMu.Unlock()
			waitFor(t, "the runner taking the receive", func() bool { return !q.rq.pending(q.mem) })
			return
		}
	}
	f.mu.Unlock()
	if _, err := q.Modify(&qpstate.Attr{State: abi.QPStateErr}, qpstate.MaskState); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "WR_FLUSH_ERR completion of the receive posted as the QP went to ERR", func() bool {
		for i := uint32(0); i < shm.Load32(cq.mem, cq.ring.Offset+abi.RingProdOff); i++ {
			var c abi.CQE
			abi.ParseCQE(cq.mem[cq.ring.Entry(i):], &c)
			if c.WRID == wrid {
				if c.Status != abi.StatusWRFlushErr || c.Opcode != abi.WCRecv {
					t.Fatalf("the receive completed with %+v, want WR_FLUSH_ERR", c)
				}
				return true
			}
		}
		return false
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lateRecvs) != 0 {
		t.Fatalf("the device QP in ERR was handed receives %+v", f.lateRecvs)
	}
}
