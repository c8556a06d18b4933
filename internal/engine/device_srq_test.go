package engine

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
	"golang.org/x/sys/unix"
)

// srqFakeDevice is fakeDevice with SRQs: it records the SRQs made, the
// receives posted to them, their modifies and the QPs made on them.
type srqFakeDevice struct {
	fakeDevice
	smu       sync.Mutex
	srqs      []verbs.SRQAttr
	srqPosts  [][]verbs.RecvWR
	srqMods   [][2]uint32 // mask, limit
	resizes   []uint32    // max_wr of each resize
	onSRQ     int
	srqsGone  int
	limit     uint32
	refuseSRQ error
	// count only (the allocation test): the receives posted and the last
	// one's ID, nothing kept.
	countOnly bool
	nPosted   atomic.Int64
	lastWRID  atomic.Uint64
}

func (f *srqFakeDevice) CreateSRQ(a verbs.SRQAttr) (verbs.SRQ, error) {
	f.smu.Lock()
	defer f.smu.Unlock()
	f.srqs = append(f.srqs, a)
	return verbs.SRQ{Handle: uint32(len(f.srqs)) + 6, Attr: a}, nil
}
func (f *srqFakeDevice) ModifySRQ(s verbs.SRQ, mask uint32, a verbs.SRQAttr) error {
	f.smu.Lock()
	defer f.smu.Unlock()
	f.srqMods = append(f.srqMods, [2]uint32{mask, a.Limit})
	if mask&verbs.SRQMaxWR != 0 {
		f.resizes = append(f.resizes, a.MaxWR)
	}
	if mask&verbs.SRQLimit != 0 {
		f.limit = a.Limit
	}
	return nil
}
func (f *srqFakeDevice) QuerySRQ(s verbs.SRQ) (verbs.SRQAttr, error) {
	f.smu.Lock()
	defer f.smu.Unlock()
	return verbs.SRQAttr{MaxWR: s.Attr.MaxWR, MaxSGE: s.Attr.MaxSGE, Limit: f.limit}, nil
}
func (f *srqFakeDevice) DestroySRQ(verbs.SRQ) error {
	f.smu.Lock()
	f.srqsGone++
	f.smu.Unlock()
	return nil
}
func (f *srqFakeDevice) PostSRQRecv(s verbs.SRQ, wrs []verbs.RecvWR) error {
	f.smu.Lock()
	defer f.smu.Unlock()
	if f.refuseSRQ != nil {
		return f.refuseSRQ
	}
	if f.countOnly {
		f.lastWRID.Store(wrs[len(wrs)-1].WRID)
		f.nPosted.Add(int64(len(wrs)))
		return nil
	}
	b := append([]verbs.RecvWR(nil), wrs...)
	for i := range b {
		b[i].SGEs = append([]verbs.SGE(nil), b[i].SGEs...)
	}
	f.srqPosts = append(f.srqPosts, b)
	return nil
}
func (f *srqFakeDevice) CreateQPOnSRQ(s, r verbs.CQ, srq verbs.SRQ, c verbs.QPCap) (verbs.QP, error) {
	f.smu.Lock()
	f.onSRQ++
	f.smu.Unlock()
	return f.CreateQP(s, r, c)
}

// posted returns the receives the device SRQ was given, in order.
func (f *srqFakeDevice) posted() []verbs.RecvWR {
	f.smu.Lock()
	defer f.smu.Unlock()
	var all []verbs.RecvWR
	for _, b := range f.srqPosts {
		all = append(all, b...)
	}
	return all
}

// srqEvents records the events with their handles.
type srqEvents struct {
	mu  sync.Mutex
	got [][2]uint32 // type, handle
}

func (e *srqEvents) Event(t abi.EventType, h uint32, _ uint32, _ string) {
	e.mu.Lock()
	e.got = append(e.got, [2]uint32{uint32(t), h})
	e.mu.Unlock()
}

func (e *srqEvents) has(t abi.EventType, h uint32) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, g := range e.got {
		if g == [2]uint32{uint32(t), h} {
			return true
		}
	}
	return false
}

// srqScene is a bound adapter with a region, a CQ, an SRQ on the device
// and two RC QPs on it; bell is the client's end of the SRQ's doorbell.
type srqScene struct {
	f    *srqFakeDevice
	u    *DeviceUplink
	srq  *RQ
	qps  [2]*QP
	cq   *CQ
	lkey uint32
	bell int
	ev   *srqEvents
	prod uint32
}

func newSRQScene(t *testing.T, maxWR int) *srqScene {
	t.Helper()
	h := NewHost()
	t.Cleanup(h.Close)
	s := &srqScene{f: &srqFakeDevice{}, ev: &srqEvents{}}
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(a)
	s.u = NewDeviceUplink("hca0", s.f, [][16]byte{{15: 1}})
	if err := a.Bind(s.u); err != nil {
		t.Fatal(err)
	}
	pd := a.NewPD()
	var err error
	if s.cq, err = NewCQ(64); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.cq.Close)
	region, err := shm.NewRegion("mr", 4096)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := RegisterMR(pd, region, 0x10000, 4096, abi.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mr.Deregister)
	s.lkey, _ = mr.DeviceKeys()
	if s.srq, err = NewSRQ(pd, maxWR, 1); err != nil {
		t.Fatal(err)
	}
	s.srq.Handle, s.srq.Events = 77, s.ev
	if err := s.srq.PutOnDevice(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.srq.Close)
	if s.bell, err = s.srq.ShareDoorbell(); err != nil || s.bell < 0 {
		t.Fatalf("the SRQ's doorbell: %d, %v", s.bell, err)
	}
	t.Cleanup(func() { unix.Close(s.bell) })
	for i := range s.qps {
		q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq, SRQ: s.srq, Events: &events{},
			Caps: proto.QPCaps{MaxSendWR: 4, MaxSendSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(q.Destroy)
		init := qpstate.Attr{State: abi.QPStateInit, PortNum: 1}
		if _, err := q.Modify(&init, qpstate.MaskState|qpstate.MaskPKeyIndex|qpstate.MaskPort|qpstate.MaskAccessFlags); err != nil {
			t.Fatal(err)
		}
		s.qps[i] = q
	}
	return s
}

// post writes n receives into the SRQ's ring as the guest library does and
// rings the doorbell when the ring's notify word asks.
func (s *srqScene) post(t *testing.T, wrids ...uint64) {
	t.Helper()
	r := s.srq.Ring()
	mem := s.srq.mem
	for _, id := range wrids {
		e := r.Entry(s.prod)
		if err := abi.PutRecvWQE(mem[e:e+r.Stride], id, []abi.SGE{{Addr: 0x10000 + id*16, Length: 16, LKey: s.lkey}}); err != nil {
			t.Fatal(err)
		}
		s.prod++
	}
	shm.Store32(mem, r.Offset+abi.RingProdOff, s.prod)
	if shm.Load32(mem, r.Offset+abi.RingNotifyOff) != 0 {
		if _, err := unix.Write(s.bell, []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
}

// complete gives the completion of device receive wr on QP q, as the
// helper's push does.
func (s *srqScene) complete(q *QP, wr verbs.RecvWR, st abi.Status) {
	s.f.handler(q.dev.recv.cq.Handle, []verbs.WC{{WRID: wr.WRID, QPN: q.QPN(), Status: uint32(st), Opcode: uint32(abi.WCRecv), ByteLen: 16}})
}

// cqes returns the completions in the CQ.
func (s *srqScene) cqes() []abi.CQE {
	n := shm.Load32(s.cq.mem, s.cq.ring.Offset+abi.RingProdOff)
	out := make([]abi.CQE, n)
	for i := range n {
		abi.ParseCQE(s.cq.mem[s.cq.ring.Entry(i):], &out[i])
	}
	return out
}

// TestSRQOnDevice: a bound adapter's SRQ is the device's. Its ring asks the
// client to ring (the notify word); what the client posts reaches the
// device SRQ on the doorbell, translated to region handle and offset, no
// more than the SRQ's depth held at once; QPs on it are made on the device
// SRQ; completions in any order across its QPs come back with the client's
// wr_id, freeing their slot, and a completion the engine never gave is
// dropped; the limit is armed and queried on the device, and the device's
// limit event reaches the client as the SRQ's; destroy destroys the device
// SRQ.
func TestSRQOnDevice(t *testing.T) {
	s := newSRQScene(t, 4)
	r := s.srq.Ring()
	if shm.Load32(s.srq.mem, r.Offset+abi.RingNotifyOff) == 0 {
		t.Fatal("the bound SRQ's ring does not ask the client to ring its doorbell")
	}
	if len(s.f.srqs) != 1 || s.f.srqs[0].MaxWR != 4 || s.f.onSRQ != 2 {
		t.Fatalf("device SRQs %+v, QPs on one %d; want one of 4 entries and 2 QPs", s.f.srqs, s.f.onSRQ)
	}

	// Six posted, four (the depth) reach the device.
	s.post(t, 1, 2, 3, 4)
	waitFor(t, "four receives on the device SRQ", func() bool { return len(s.f.posted()) == 4 })
	s.post(t, 5, 6)
	for _, w := range s.f.posted() {
		if len(w.SGEs) != 1 || w.SGEs[0].Length != 16 {
			t.Fatalf("device receive %+v, want one translated SGE of 16 bytes", w)
		}
	}
	if got := s.f.posted()[2].SGEs[0].Offset; got != 3*16 {
		t.Fatalf("the third receive's SGE is at offset %d of its region, want 48", got)
	}
	if n := len(s.f.posted()); n != 4 {
		t.Fatalf("the device holds %d receives, more than the SRQ's depth 4", n)
	}

	// Out of order, across both QPs: each frees a slot, the next goes.
	p := s.f.posted()
	s.complete(s.qps[1], p[2], abi.StatusSuccess)
	s.complete(s.qps[0], p[0], abi.StatusSuccess)
	s.complete(s.qps[0], p[0], abi.StatusSuccess) // again: not held, dropped
	waitFor(t, "the two waiting receives on the device", func() bool { return len(s.f.posted()) == 6 })
	s.complete(s.qps[1], p[3], abi.StatusSuccess)
	s.complete(s.qps[0], p[1], abi.StatusSuccess)
	got := s.cqes()
	want := []struct {
		wrid uint64
		qp   *QP
	}{{3, s.qps[1]}, {1, s.qps[0]}, {4, s.qps[1]}, {2, s.qps[0]}}
	if len(got) != len(want) {
		t.Fatalf("%d completions, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].WRID != w.wrid || got[i].QPNum != w.qp.QPN() || got[i].Status != abi.StatusSuccess || got[i].Opcode != abi.WCRecv {
			t.Fatalf("completion %d: %+v, want wr_id %d on QP %#x", i, got[i], w.wrid, w.qp.QPN())
		}
	}

	// The limit: armed and read on the device; its event is the SRQ's.
	if err := s.srq.SetLimit(2); err != nil {
		t.Fatal(err)
	}
	if s.srq.Limit() != 2 || len(s.f.srqMods) != 1 || s.f.srqMods[0] != [2]uint32{verbs.SRQLimit, 2} {
		t.Fatalf("limit %d, device modifies %v; want 2 armed on the device", s.srq.Limit(), s.f.srqMods)
	}
	s.f.event(verbs.AsyncEvent{Type: verbs.EventSRQLimit, Element: s.srq.dev.srq.Handle})
	s.f.event(verbs.AsyncEvent{Type: verbs.EventSRQLimit, Element: 99}) // no such SRQ
	if !s.ev.has(abi.EventSRQLimit, 77) || len(s.ev.got) != 1 {
		t.Fatalf("events %v, want the limit event of SRQ 77 once", s.ev.got)
	}

	// Destroy: the QPs, then the SRQ, which is the device's to destroy.
	for _, q := range s.qps {
		q.Destroy()
	}
	if s.srq.Busy() {
		t.Fatal("the SRQ is still used after its QPs were destroyed")
	}
	s.srq.Close()
	if s.f.srqsGone != 1 {
		t.Fatalf("%d device SRQs destroyed, want 1", s.f.srqsGone)
	}
}

// TestSRQOnDeviceFaults: a device that goes away releases what its SRQ
// held (an SRQ's receives complete through no QP), its QPs go to ERR, a
// completion arriving afterwards is dropped and what the client posts then
// is taken and never reaches the device; a device that refuses a batch
// puts the SRQ in error (IBV_EVENT_SRQ_ERR) likewise; and an SRQ of a
// device without SRQs is refused with ErrDeviceQP.
func TestSRQOnDeviceFaults(t *testing.T) {
	t.Run("device gone", func(t *testing.T) {
		s := newSRQScene(t, 4)
		s.post(t, 1, 2)
		waitFor(t, "two receives on the device SRQ", func() bool { return len(s.f.posted()) == 2 })
		held := s.f.posted()
		s.u.DeviceFatal(errors.New("unplugged"))
		s.complete(s.qps[0], held[0], abi.StatusWRFlushErr)
		if c := s.cqes(); len(c) != 0 {
			t.Fatalf("completions %+v after the device went away, want none (the SRQ's receives are released)", c)
		}
		for _, q := range s.qps {
			waitFor(t, "the QP in ERR", func() bool { return q.State() == abi.QPStateErr })
		}
		s.post(t, 3)
		r := s.srq.Ring()
		waitFor(t, "the post taken", func() bool { return shm.Load32(s.srq.mem, r.Offset+abi.RingConsOff) == 3 })
		if n := len(s.f.posted()); n != 2 {
			t.Fatalf("the device was given %d receives, want the 2 before it went away", n)
		}
	})
	t.Run("batch refused", func(t *testing.T) {
		s := newSRQScene(t, 4)
		s.f.smu.Lock()
		s.f.refuseSRQ = errors.New("ENOMEM")
		s.f.smu.Unlock()
		s.post(t, 1)
		waitFor(t, "the SRQ error event", func() bool { return s.ev.has(abi.EventSRQErr, 77) })
	})
	t.Run("device without SRQs", func(t *testing.T) {
		h := NewHost()
		t.Cleanup(h.Close)
		a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
		h.AddAdapter(a)
		if err := a.Bind(NewDeviceUplink("hca0", &fakeDevice{}, nil)); err != nil {
			t.Fatal(err)
		}
		srq, err := NewSRQ(a.NewPD(), 4, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer srq.Close()
		if err := srq.PutOnDevice(); !errors.Is(err, ErrDeviceQP) {
			t.Fatalf("PutOnDevice: %v, want ErrDeviceQP", err)
		}
	})
}

// TestSRQOnDeviceAllocs: a receive posted to a bound SRQ, handed to the
// device on the doorbell and completed allocates nothing in the engine
// (the runner's batch, the table and the completion's path are made
// once).
func TestSRQOnDeviceAllocs(t *testing.T) {
	s := newSRQScene(t, 8)
	s.f.countOnly = true
	r := s.srq.Ring()
	mem := s.srq.mem
	sgl := []abi.SGE{{Addr: 0x10000, Length: 16, LKey: s.lkey}}
	one := []byte{1}
	wc := []verbs.WC{{QPN: s.qps[0].QPN(), Opcode: uint32(abi.WCRecv), ByteLen: 16}}
	cqh := s.qps[0].dev.recv.cq.Handle
	round := func() {
		e := r.Entry(s.prod)
		_ = abi.PutRecvWQE(mem[e:e+r.Stride], uint64(s.prod), sgl)
		s.prod++
		shm.Store32(mem, r.Offset+abi.RingProdOff, s.prod)
		_, _ = unix.Write(s.bell, one)
		for s.f.nPosted.Load() != int64(s.prod) {
			runtime.Gosched()
		}
		wc[0].WRID = s.f.lastWRID.Load()
		s.f.handler(cqh, wc)
		shm.Store32(s.cq.mem, s.cq.ring.Offset+abi.RingConsOff, shm.Load32(s.cq.mem, s.cq.ring.Offset+abi.RingProdOff))
	}
	round()
	if n := testing.AllocsPerRun(200, round); n != 0 {
		t.Fatalf("%v allocations per receive posted, handed and completed, want 0", n)
	}
}

// TestSRQOnDeviceResize: ibv_modify_srq's resize of a bound SRQ resizes the
// device's SRQ first, then the ring, whose notify word stays set, and the
// device may then hold as many receives as the new size.
func TestSRQOnDeviceResize(t *testing.T) {
	s := newSRQScene(t, 4)
	s.post(t, 1, 2, 3, 4)
	waitFor(t, "four receives on the device SRQ", func() bool { return len(s.f.posted()) == 4 })
	s.post(t, 5, 6) // wait in the ring: the device holds the depth
	_, fd, err := s.srq.Resize(16, -1)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	s.f.smu.Lock()
	resizes := append([]uint32(nil), s.f.resizes...)
	s.f.smu.Unlock()
	if len(resizes) != 1 || resizes[0] != 16 {
		t.Fatalf("device resizes %v, want one to 16", resizes)
	}
	r := s.srq.Ring()
	if r.Entries != 16 || shm.Load32(s.srq.mem, r.Offset+abi.RingNotifyOff) != 1 {
		t.Fatalf("the new ring has %d entries, notify word %d; want 16 and set", r.Entries, shm.Load32(s.srq.mem, r.Offset+abi.RingNotifyOff))
	}
	s.post(t, 7, 8, 9, 10)
	waitFor(t, "ten receives on the device SRQ", func() bool { return len(s.f.posted()) == 10 })
	for i, w := range s.f.posted() {
		if w.WRID&devTagMask != devSRQTag {
			t.Fatalf("device receive %d has ID %#x, not the SRQ's", i, w.WRID)
		}
	}
}
