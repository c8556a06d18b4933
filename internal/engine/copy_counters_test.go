package engine

import (
	"os"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
)

// TestCopyCounters: the port counters say what the daemon copied itself
// and what a device moved. An RDMA WRITE on the memcpy path is one copy of
// its bytes (copy_msgs 1, copy_bytes its length, nothing on the device);
// the same bytes posted on an adapter bound to a verbs uplink are handed to
// the device (path_verbs, verbs_bytes) and copied by nobody (copy_bytes 0).
func TestCopyCounters(t *testing.T) {
	const size = 3000
	tests := []struct {
		name  string
		write func(t *testing.T) *Adapter // does the WRITEs, returns the requester's adapter
		msgs  uint64                      // WRITEs of size bytes it did
		want  proto.Counters              // the copy and verbs counters after them
	}{
		{"memcpy", memcpyWrite, 1, proto.Counters{CopyMsgs: 1, CopyBytes: size}},
		{"verbs uplink", deviceWrites, 3, proto.Counters{PathVerbs: 3, VerbsBytes: 3 * size}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.write(t)
			got := a.Counters.Snapshot()
			got = proto.Counters{CopyMsgs: got.CopyMsgs, CopyBytes: got.CopyBytes, PathVerbs: got.PathVerbs, VerbsBytes: got.VerbsBytes}
			if got != tt.want {
				t.Fatalf("after %d WRITEs of %d bytes: copy_msgs %d copy_bytes %d path_verbs %d verbs_bytes %d; want %d %d %d %d",
					tt.msgs, size, got.CopyMsgs, got.CopyBytes, got.PathVerbs, got.VerbsBytes,
					tt.want.CopyMsgs, tt.want.CopyBytes, tt.want.PathVerbs, tt.want.VerbsBytes)
			}
		})
	}
}

// memcpyWrite does one 3000-byte RDMA WRITE between two QPs of one
// adapter (the memcpy path) and returns the adapter.
func memcpyWrite(t *testing.T) *Adapter {
	x, _ := connectedPair(t)
	pd := x.PD()
	page := uint64(os.Getpagesize())
	src, err := shm.NewRegion("src", int(page))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := shm.NewRegion("dst", int(page))
	if err != nil {
		t.Fatal(err)
	}
	local, err := RegisterMR(pd, src, shm.Addr(src.Bytes()), page, abi.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Deregister)
	remote, err := RegisterMR(pd, dst, shm.Addr(dst.Bytes()), page, abi.AccessLocalWrite|abi.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remote.Deregister)
	w := abi.SendWQE{WRID: 1, Opcode: abi.OpRDMAWrite, Flags: abi.SendSignaled, RemoteAddr: shm.Addr(dst.Bytes()), RKey: remote.Key()}
	if c := postAndWait(t, x, &w, []abi.SGE{{Addr: shm.Addr(src.Bytes()), Length: 3000, LKey: local.Key()}}); c.Status != abi.StatusSuccess {
		t.Fatalf("the WRITE completed with %v", c.Status)
	}
	return x.adapter
}

// deviceWrites posts three 3000-byte RDMA WRITEs on an RC QP of an
// adapter bound to a recording device and returns the adapter once the
// device has them.
func deviceWrites(t *testing.T) *Adapter {
	h := NewHost()
	t.Cleanup(h.Close)
	f := &fakeDevice{}
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(a)
	if err := a.Bind(NewDeviceUplink("hca0", f, [][16]byte{{15: 1}})); err != nil {
		t.Fatal(err)
	}
	pd := a.NewPD()
	cq, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	region, err := shm.NewRegion("mr", 4*4096)
	if err != nil {
		t.Fatal(err)
	}
	vaddr := shm.Addr(region.Bytes())
	mr, err := RegisterMR(pd, region, vaddr, 4*4096, abi.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mr.Deregister)
	lkey, _ := mr.DeviceKeys()
	q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{},
		Caps: proto.QPCaps{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	for _, s := range []struct {
		attr qpstate.Attr
		mask qpstate.Mask
	}{
		{qpstate.Attr{State: abi.QPStateInit, PortNum: 1}, qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskAccessFlags},
		{qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DGID: [16]byte{15: 2}, PortNum: 1}, PathMTU: abi.MTU1024, DestQPN: 0x1234, MaxDestRdAtomic: 1, MinRNRTimer: 12},
			qpstate.MaskState | qpstate.MaskAV | qpstate.MaskPathMTU | qpstate.MaskDestQPN | qpstate.MaskRQPSN | qpstate.MaskMaxDestRdAtomic | qpstate.MaskMinRNRTimer},
		{qpstate.Attr{State: abi.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			qpstate.MaskState | qpstate.MaskTimeout | qpstate.MaskRetryCnt | qpstate.MaskRNRRetry | qpstate.MaskSQPSN | qpstate.MaskMaxQPRdAtomic},
	} {
		if _, err := q.Modify(&s.attr, s.mask); err != nil {
			t.Fatal(err)
		}
	}
	sq := q.SQ()
	for i := uint32(0); i < 3; i++ {
		w := abi.SendWQE{WRID: uint64(i), Opcode: abi.OpRDMAWrite, Flags: abi.SendSignaled, RemoteAddr: 0x9000, RKey: 0x4321}
		sgl := []abi.SGE{{Addr: vaddr + 4096*uint64(i), Length: 3000, LKey: lkey}}
		if err := abi.PutSendWQE(q.mem[sq.Entry(i):sq.Entry(i)+sq.Stride], &w, sgl, nil); err != nil {
			t.Fatal(err)
		}
	}
	shm.Store32(q.mem, abi.RingProdOff, 3)
	q.kickWorker()
	waitFor(t, "three WRITEs posted to the device and counted (path_verbs 3)", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for _, b := range f.sends {
			n += len(b)
		}
		return n == 3 && a.Counters.PathVerbs.Load() == 3
	})
	return a
}
