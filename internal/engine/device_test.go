package engine

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
	"golang.org/x/sys/unix"
)

// fakeDevice records what the engine asks of a device; its numbers are
// chosen far from the engine's own so that a test sees whose it reports.
type fakeDevice struct {
	mu      sync.Mutex
	mrs     []verbs.MR
	regs    []fakeReg
	cqs     int
	qpn     uint32
	modify  []verbs.QPAttr
	sends   [][]verbs.SendWR
	recvs   [][]verbs.RecvWR
	handler func(cq uint32, wcs []verbs.WC)
	dereg   int
	qpsGone int
	atPost  func() // called as a send batch is posted
	// UD (device_ud_test.go)
	udQPs    int
	udModify [][3]uint32 // state, qkey, sq_psn
	udSends  [][]verbs.UDSendWR
	ahs      []verbs.AHAttr
	ahsGone  []verbs.AH
	event    func(verbs.AsyncEvent)
	gone     func(error)
	postErr  error // what PostSend and PostRecv return, when set
	// As rxe: a receive posted to a QP in ERR is kept and never completes.
	atModify  func(verbs.QPAttr) // called after a QP is moved
	errQPs    map[uint32]bool    // handles of the QPs in ERR
	lateRecvs []verbs.RecvWR     // receives posted to a QP in ERR
}

type fakeReg struct {
	inode          uint64
	offset, length uint64
	access         uint32
	iova           uint64
}

func (f *fakeDevice) RegMR(fd int, offset, length uint64, access uint32, iova uint64) (verbs.MR, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return verbs.MR{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := uint32(len(f.mrs))
	m := verbs.MR{Handle: n, LKey: 0xdd00 + n, RKey: 0xee00 + n, Addr: 0x5550000 + uint64(n)<<20, IOVA: iova}
	f.mrs = append(f.mrs, m)
	f.regs = append(f.regs, fakeReg{st.Ino, offset, length, access, iova})
	return m, nil
}
func (f *fakeDevice) DeregMR(verbs.MR) error { f.mu.Lock(); f.dereg++; f.mu.Unlock(); return nil }
func (f *fakeDevice) CreateCQ(cqe uint32, push bool) (verbs.CQ, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cqs++
	return verbs.CQ{Handle: uint32(f.cqs), CQE: cqe}, nil
}
func (f *fakeDevice) DestroyCQ(verbs.CQ) error { return nil }
func (f *fakeDevice) CreateQP(s, r verbs.CQ, c verbs.QPCap) (verbs.QP, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.qpn++
	return verbs.QP{Handle: f.qpn, QPN: 0xabc000 + f.qpn, Cap: c}, nil
}
func (f *fakeDevice) ModifyQP(q verbs.QP, a verbs.QPAttr) error {
	f.mu.Lock()
	f.modify = append(f.modify, a)
	if f.errQPs == nil {
		f.errQPs = map[uint32]bool{}
	}
	f.errQPs[q.Handle] = a.State == uint32(abi.QPStateErr)
	fn := f.atModify
	f.mu.Unlock()
	if fn != nil {
		fn(a)
	}
	return nil
}
func (f *fakeDevice) DestroyQP(verbs.QP) error { f.mu.Lock(); f.qpsGone++; f.mu.Unlock(); return nil }
func (f *fakeDevice) PostSend(q verbs.QP, wrs []verbs.SendWR) error {
	f.mu.Lock()
	fn := f.atPost
	f.mu.Unlock()
	if fn != nil {
		fn()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.postErr != nil {
		return f.postErr
	}
	b := append([]verbs.SendWR(nil), wrs...)
	for i := range b {
		b[i].SGEs = append([]verbs.SGE(nil), b[i].SGEs...)
		b[i].Inline = append([]byte(nil), b[i].Inline...) // the helper's message carries it
	}
	f.sends = append(f.sends, b)
	return nil
}
func (f *fakeDevice) PostRecv(q verbs.QP, wrs []verbs.RecvWR) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errQPs[q.Handle] {
		f.lateRecvs = append(f.lateRecvs, wrs...)
		return nil
	}
	b := append([]verbs.RecvWR(nil), wrs...)
	for i := range b {
		b[i].SGEs = append([]verbs.SGE(nil), b[i].SGEs...)
	}
	f.recvs = append(f.recvs, b)
	return nil
}
func (f *fakeDevice) SetCompletionHandler(fn func(cq uint32, wcs []verbs.WC)) { f.handler = fn }
func (f *fakeDevice) CreateUDQP(s, r verbs.CQ, c verbs.QPCap) (verbs.QP, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.qpn++
	f.udQPs++
	return verbs.QP{Handle: f.qpn, QPN: 0xabc000 + f.qpn, Cap: c}, nil
}
func (f *fakeDevice) ModifyUDQP(q verbs.QP, state, qkey, sqPSN uint32) error {
	f.mu.Lock()
	f.udModify = append(f.udModify, [3]uint32{state, qkey, sqPSN})
	f.mu.Unlock()
	return nil
}
func (f *fakeDevice) PostSendUD(q verbs.QP, wrs []verbs.UDSendWR) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := append([]verbs.UDSendWR(nil), wrs...)
	for i := range b {
		b[i].SGEs = append([]verbs.SGE(nil), b[i].SGEs...)
	}
	f.udSends = append(f.udSends, b)
	return nil
}
func (f *fakeDevice) CreateAH(a verbs.AHAttr) (verbs.AH, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ahs = append(f.ahs, a)
	return verbs.AH{Handle: 0x70 + uint32(len(f.ahs))}, nil
}
func (f *fakeDevice) DestroyAH(ah verbs.AH) error {
	f.mu.Lock()
	f.ahsGone = append(f.ahsGone, ah)
	f.mu.Unlock()
	return nil
}
func (f *fakeDevice) SetEventHandler(fn func(verbs.AsyncEvent)) { f.event = fn }
func (f *fakeDevice) SetGoneHandler(fn func(error))             { f.gone = fn }

// waitFor polls cond until it holds (a hang guard, not a timing check).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAdapterOnDevice: an adapter bound to a verbs uplink puts its regions
// and RC QPs on the device, and reports the device's keys, QPN and GIDs;
// the states it is moved through go to the device's QP with the peer's
// QPN, PSN and GID; the send-queue runner forwards what the client posts,
// translated to region handles and offsets, as one batch per doorbell; and
// the completions the device pushes land in the instance's CQ.
func TestAdapterOnDevice(t *testing.T) {
	h := NewHost()
	t.Cleanup(h.Close)
	devGID := [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 15}
	f := &fakeDevice{}
	u := NewDeviceUplink("hca0", f, [][16]byte{{0: 0xfe, 1: 0x80, 15: 1}, devGID})
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(a)
	if err := a.Bind(u); err != nil {
		t.Fatal(err)
	}
	if g := a.GIDs(); len(g) != 2 || g[1] != devGID {
		t.Fatalf("the adapter's GIDs are %x, want the device's", g)
	}
	pd := a.NewPD()
	cq, err := NewCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)

	// A region at a memfd offset inside its second page.
	page := uint64(4096)
	owner, err := shm.NewRegion("owner", int(4*page))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	fd, err := unix.Dup(owner.FD())
	if err != nil {
		t.Fatal(err)
	}
	region, err := shm.MapRegionRange(fd, page+100, 2*page)
	if err != nil {
		t.Fatal(err)
	}
	const vaddr = 0x7f0000001064
	mr, err := RegisterMR(pd, region, vaddr, 2*page, abi.AccessLocalWrite|abi.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(owner.FD(), &st); err != nil {
		t.Fatal(err)
	}
	if r := f.regs; len(r) != 1 || r[0].inode != st.Ino || r[0].offset != page || r[0].length != 100+2*page || r[0].access != uint32(abi.AccessLocalWrite|abi.AccessRemoteWrite) {
		t.Fatalf("the device registered %+v; want the application's memfd (inode %d) from offset %d, %d bytes", r, st.Ino, page, 100+2*page)
	}
	// The device knows the region by the application's addresses: a
	// native peer's RDMA WRITE names vaddr.
	if r := f.regs[0]; r.iova != vaddr-100 {
		t.Fatalf("the device registered at iova %#x, want the application's %#x (its address of the page's first byte)", r.iova, uint64(vaddr-100))
	}
	if a, ok := mr.DeviceAddr(); !ok || a != vaddr {
		t.Fatalf("a peer reaches byte 0 at %#x (%v), want the application's address %#x", a, ok, uint64(vaddr))
	}
	if l, r := mr.DeviceKeys(); l != f.mrs[0].LKey || r != f.mrs[0].RKey {
		t.Fatalf("the region reports keys %#x/%#x, want the device's %#x/%#x", l, r, f.mrs[0].LKey, f.mrs[0].RKey)
	}

	if _, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeUC, SendCQ: cq, RecvCQ: cq, Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); !errors.Is(err, ErrDeviceQP) {
		t.Fatalf("a UC QP on a device-bound adapter: %v, want ErrDeviceQP", err)
	}
	q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{},
		Caps: proto.QPCaps{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 2, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if q.QPN() != 0xabc001 {
		t.Fatalf("QPN %#x, want the device's 0xabc001", q.QPN())
	}
	if h.LookupQP(devGID, q.QPN()) != nil {
		t.Fatal("the device's QP is in the host's software table")
	}

	// Receives posted in INIT reach the device before the QP connects.
	steps := []struct {
		attr qpstate.Attr
		mask qpstate.Mask
	}{
		{qpstate.Attr{State: abi.QPStateInit, PortNum: 1, AccessFlags: abi.AccessRemoteWrite},
			qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskAccessFlags},
	}
	for _, s := range steps {
		if _, err := q.Modify(&s.attr, s.mask); err != nil {
			t.Fatal(err)
		}
	}
	rq := q.RQ()
	if shm.Load32(q.mem, rq.Offset+abi.RingNotifyOff) == 0 {
		t.Fatal("the client is not asked to ring after posting receives")
	}
	for i := uint32(0); i < 2; i++ {
		off := rq.Entry(i)
		if err := abi.PutRecvWQE(q.mem[off:off+rq.Stride], 100+uint64(i), []abi.SGE{{Addr: vaddr + 1000*uint64(i), Length: 500, LKey: f.mrs[0].LKey}}); err != nil {
			t.Fatal(err)
		}
	}
	shm.Store32(q.mem, rq.Offset+abi.RingProdOff, 2)
	q.kickWorker()
	waitFor(t, "receive batch", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.recvs) == 1 })
	if r := f.recvs[0]; len(r) != 2 || r[1].SGEs[0] != (verbs.SGE{MR: 0, Length: 500, Offset: 100 + 1000}) {
		t.Fatalf("the device got receives %+v", r)
	}

	peerGID := [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 16}
	rtr := qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DGID: peerGID, SGIDIndex: 1, HopLimit: 64, PortNum: 1}, PathMTU: abi.MTU1024, DestQPN: 0x1234, RQPSN: 0x777, MaxDestRdAtomic: 1, MinRNRTimer: 12}
	if _, err := q.Modify(&rtr, qpstate.MaskState|qpstate.MaskAV|qpstate.MaskPathMTU|qpstate.MaskDestQPN|qpstate.MaskRQPSN|qpstate.MaskMaxDestRdAtomic|qpstate.MaskMinRNRTimer); err != nil {
		t.Fatal(err)
	}
	rts := qpstate.Attr{State: abi.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 0x888, MaxRdAtomic: 1}
	if _, err := q.Modify(&rts, qpstate.MaskState|qpstate.MaskTimeout|qpstate.MaskRetryCnt|qpstate.MaskRNRRetry|qpstate.MaskSQPSN|qpstate.MaskMaxQPRdAtomic); err != nil {
		t.Fatal(err)
	}
	m := f.modify
	if len(m) != 3 || m[0].State != uint32(abi.QPStateInit) || m[1].DestQPN != 0x1234 || m[1].RQPSN != 0x777 || m[1].DGID != peerGID || m[1].SGIDIndex != 1 ||
		!m[1].IsGlobal || m[1].PathMTU != uint32(abi.MTU1024) || m[2].SQPSN != 0x888 || m[2].State != uint32(abi.QPStateRTS) {
		t.Fatalf("the device's QP was moved with %+v", m)
	}

	// Three sends in one doorbell: one batch. Their slots are the
	// device's until it completes them (device_slots_test.go).
	var consAtPost atomic.Uint32
	f.mu.Lock()
	f.atPost = func() { consAtPost.Store(shm.Load32(q.mem, abi.RingConsOff)) }
	f.mu.Unlock()
	sq := q.SQ()
	for i := uint32(0); i < 3; i++ {
		w := abi.SendWQE{WRID: 7 + uint64(i), Opcode: abi.OpSend, Flags: abi.SendSignaled}
		if i == 2 {
			w = abi.SendWQE{WRID: 9, Opcode: abi.OpRDMAWrite, Flags: abi.SendSignaled, RemoteAddr: 0x9000, RKey: 0x4321}
		}
		sgl := []abi.SGE{{Addr: vaddr + 64*uint64(i), Length: 64, LKey: f.mrs[0].LKey}}
		if err := abi.PutSendWQE(q.mem[sq.Entry(i):sq.Entry(i)+sq.Stride], &w, sgl, nil); err != nil {
			t.Fatal(err)
		}
	}
	shm.Store32(q.mem, abi.RingProdOff, 3)
	q.kickWorker()
	waitFor(t, "send batch", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.sends) > 0 })
	f.mu.Lock()
	s := f.sends
	f.mu.Unlock()
	if len(s) != 1 || len(s[0]) != 3 || s[0][2].Opcode != verbs.WRRDMAWrite || s[0][2].RemoteAddr != 0x9000 || s[0][2].RKey != 0x4321 ||
		s[0][1].SGEs[0] != (verbs.SGE{MR: 0, Length: 64, Offset: 100 + 64}) || s[0][0].Flags != uint32(abi.SendSignaled) {
		t.Fatalf("the device got send batches %+v, want one of three", s)
	}
	if n := consAtPost.Load(); n != 0 {
		t.Fatalf("the send ring's consumer index was %d as the batch was posted, want 0", n)
	}

	// The device's completions land in the instance's CQ, with the
	// client's wr_ids; the first send's frees its slot.
	f.handler(1, []verbs.WC{{WRID: s[0][0].WRID, Opcode: verbs.WCSend, QPN: q.QPN()}, {WRID: f.recvs[0][0].WRID, Opcode: verbs.WCRecv, ByteLen: 33, QPN: q.QPN(), SrcQP: 0x1234}})
	if n := shm.Load32(q.mem, abi.RingConsOff); n != 1 {
		t.Fatalf("after the first send's completion the consumer index is %d, want 1", n)
	}
	if n := shm.Load32(cq.mem, cq.ring.Offset+abi.RingProdOff); n != 2 {
		t.Fatalf("%d completions in the CQ, want 2", n)
	}
	var c abi.CQE
	abi.ParseCQE(cq.mem[cq.ring.Entry(0):], &c)
	if c.WRID != 7 || c.Opcode != abi.WCSend || c.Status != abi.StatusSuccess {
		t.Fatalf("completion %+v, want wr_id 7", c)
	}
	abi.ParseCQE(cq.mem[cq.ring.Entry(1):], &c)
	if c.WRID != 100 || c.Opcode != abi.WCRecv || c.ByteLen != 33 || c.QPNum != q.QPN() || c.Status != abi.StatusSuccess {
		t.Fatalf("completion %+v", c)
	}
	// An error completion puts the instance's QP in ERR, as the device's is.
	f.handler(1, []verbs.WC{{WRID: s[0][1].WRID, Status: verbs.WCRemAccessErr, QPN: q.QPN()}})
	if q.State() != abi.QPStateErr {
		t.Fatalf("after a REM_ACCESS_ERR the QP is %v, want ERR", q.State())
	}

	q.Destroy()
	mr.Deregister()
	if f.qpsGone != 1 || f.dereg != 1 {
		t.Fatalf("destroyed %d device QPs, deregistered %d regions; want 1, 1", f.qpsGone, f.dereg)
	}
}

// TestDeviceQPRefusals: what the engine cannot put on the device completes
// with the status a device gives and moves the QP to ERR, and the device
// is handed nothing of it: a receive or a send naming memory the device
// does not have (LOC_PROT_ERR). (Inline sends go to the device:
// TestDeviceInlineSend.)
func TestDeviceQPRefusals(t *testing.T) {
	tests := []struct {
		name   string
		recv   bool
		inline bool
		lkey   uint32 // 0: the device's key of the region
		status abi.Status
	}{
		{"receive into an unknown key", true, false, 0x1234, abi.StatusLocProtErr},
		{"send from an unknown key", false, false, 0x1234, abi.StatusLocProtErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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
			region, err := shm.NewRegion("mr", 4096)
			if err != nil {
				t.Fatal(err)
			}
			mr, err := RegisterMR(pd, region, 0x10000, 4096, abi.AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Deregister()
			q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{},
				Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Destroy()
			steps := []struct {
				attr qpstate.Attr
				mask qpstate.Mask
			}{
				{qpstate.Attr{State: abi.QPStateInit, PortNum: 1}, qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskAccessFlags},
				{qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DGID: [16]byte{15: 2}, PortNum: 1}, PathMTU: abi.MTU1024, DestQPN: 0x99, MaxDestRdAtomic: 1, MinRNRTimer: 12},
					qpstate.MaskState | qpstate.MaskAV | qpstate.MaskPathMTU | qpstate.MaskDestQPN | qpstate.MaskRQPSN | qpstate.MaskMaxDestRdAtomic | qpstate.MaskMinRNRTimer},
				{qpstate.Attr{State: abi.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
					qpstate.MaskState | qpstate.MaskTimeout | qpstate.MaskRetryCnt | qpstate.MaskRNRRetry | qpstate.MaskSQPSN | qpstate.MaskMaxQPRdAtomic},
			}
			for _, s := range steps {
				if _, err := q.Modify(&s.attr, s.mask); err != nil {
					t.Fatal(err)
				}
			}
			lkey := tt.lkey
			if lkey == 0 {
				lkey, _ = mr.DeviceKeys()
			}
			sgl := []abi.SGE{{Addr: 0x10000, Length: 16, LKey: lkey}}
			if tt.recv {
				rq := q.RQ()
				if err := abi.PutRecvWQE(q.mem[rq.Entry(0):rq.Entry(0)+rq.Stride], 5, sgl); err != nil {
					t.Fatal(err)
				}
				shm.Store32(q.mem, rq.Offset+abi.RingProdOff, 1)
			} else {
				w := abi.SendWQE{WRID: 5, Opcode: abi.OpSend, Flags: abi.SendSignaled}
				var inline []byte
				if tt.inline {
					w.Flags |= abi.SendInline
					inline, sgl = []byte("sixteen bytes..."), nil
				}
				sq := q.SQ()
				if err := abi.PutSendWQE(q.mem[sq.Entry(0):sq.Entry(0)+sq.Stride], &w, sgl, inline); err != nil {
					t.Fatal(err)
				}
				shm.Store32(q.mem, abi.RingProdOff, 1)
			}
			q.kickWorker()
			waitFor(t, "completion", func() bool { return shm.Load32(cq.mem, cq.ring.Offset+abi.RingProdOff) != 0 })
			var c abi.CQE
			abi.ParseCQE(cq.mem[cq.ring.Entry(0):], &c)
			if c.WRID != 5 || c.Status != tt.status {
				t.Fatalf("completion %+v, want wr_id 5 with status %v", c, tt.status)
			}
			if q.State() != abi.QPStateErr {
				t.Fatalf("the QP is %v, want ERR", q.State())
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.sends) != 0 || len(f.recvs) != 0 {
				t.Fatalf("the device was handed %v / %v", f.sends, f.recvs)
			}
		})
	}
}
