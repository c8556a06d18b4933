package engine

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
)

// faultFixture is an RTS QP on a fake device with a region, three sends
// (the first two unsignaled) and two receives posted to the device.
type faultFixture struct {
	f      *fakeDevice
	u      *DeviceUplink
	a      *Adapter
	pd     *PD
	cq     *CQ
	q      *QP
	ev     *events
	cqEv   *events
	mr     *MR
	lkey   uint32
	closed bool
}

func newFaultFixture(t *testing.T) *faultFixture {
	t.Helper()
	h := NewHost()
	t.Cleanup(h.Close)
	x := &faultFixture{f: &fakeDevice{}, ev: &events{}, cqEv: &events{}}
	x.u = NewDeviceUplink("hca0", x.f, [][16]byte{{15: 1}})
	x.a = NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(x.a)
	if err := x.a.Bind(x.u); err != nil {
		t.Fatal(err)
	}
	x.pd = x.a.NewPD()
	cq, err := NewCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	cq.Events = x.cqEv
	t.Cleanup(cq.Close)
	x.cq = cq
	region, err := shm.NewRegion("mr", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if x.mr, err = RegisterMR(x.pd, region, 0x10000, 4096, abi.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	x.lkey, _ = x.mr.DeviceKeys()
	x.q, err = NewQP(QPConfig{PD: x.pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: x.ev,
		Caps: proto.QPCaps{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	q := x.q
	for _, s := range []struct {
		attr qpstate.Attr
		mask qpstate.Mask
	}{
		{qpstate.Attr{State: abi.QPStateInit, PortNum: 1}, qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskAccessFlags},
		{qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DGID: [16]byte{15: 2}, PortNum: 1}, PathMTU: abi.MTU1024, DestQPN: 0x99, MaxDestRdAtomic: 1, MinRNRTimer: 12},
			qpstate.MaskState | qpstate.MaskAV | qpstate.MaskPathMTU | qpstate.MaskDestQPN | qpstate.MaskRQPSN | qpstate.MaskMaxDestRdAtomic | qpstate.MaskMinRNRTimer},
		{qpstate.Attr{State: abi.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			qpstate.MaskState | qpstate.MaskTimeout | qpstate.MaskRetryCnt | qpstate.MaskRNRRetry | qpstate.MaskSQPSN | qpstate.MaskMaxQPRdAtomic},
	} {
		if _, err := q.Modify(&s.attr, s.mask); err != nil {
			t.Fatal(err)
		}
	}
	rq := q.RQ()
	for i := uint32(0); i < 2; i++ {
		if err := abi.PutRecvWQE(q.mem[rq.Entry(i):rq.Entry(i)+rq.Stride], 50+uint64(i), []abi.SGE{{Addr: 0x10000, Length: 64, LKey: x.lkey}}); err != nil {
			t.Fatal(err)
		}
	}
	shm.Store32(q.mem, rq.Offset+abi.RingProdOff, 2)
	sq := q.SQ()
	for i := uint32(0); i < 3; i++ {
		w := abi.SendWQE{WRID: 10 + uint64(i), Opcode: abi.OpRDMAWrite, RemoteAddr: 0x9000, RKey: 0x4321}
		if i == 2 {
			w.Flags = abi.SendSignaled
		}
		if err := abi.PutSendWQE(q.mem[sq.Entry(i):sq.Entry(i)+sq.Stride], &w, []abi.SGE{{Addr: 0x10000, Length: 64, LKey: x.lkey}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	shm.Store32(q.mem, abi.RingProdOff, 3)
	q.kickWorker()
	waitFor(t, "posts", func() bool {
		x.f.mu.Lock()
		defer x.f.mu.Unlock()
		n := 0
		for _, b := range x.f.sends {
			n += len(b)
		}
		return n == 3 && len(x.f.recvs) > 0
	})
	t.Cleanup(func() {
		if !x.closed {
			x.q.Destroy()
			x.mr.Deregister()
		}
	})
	return x
}

// completions returns the CQ's completions so far.
func (x *faultFixture) completions() []abi.CQE {
	n := shm.Load32(x.cq.mem, x.cq.ring.Offset+abi.RingProdOff)
	out := make([]abi.CQE, n)
	for i := range out {
		abi.ParseCQE(x.cq.mem[x.cq.ring.Entry(uint32(i)):], &out[i])
	}
	return out
}

// TestDeviceFaults: each asynchronous event of the device becomes the
// instances' event it maps to, and a device that goes away (its fatal
// event, or the helper gone) fails the QPs: DEVICE_FATAL to the client,
// the QP in ERR, every request posted to the device and not completed
// flushed with IBV_WC_WR_FLUSH_ERR (unsignaled ones too), and new QPs and
// regions on the adapter refused naming the link and the fix.
func TestDeviceFaults(t *testing.T) {
	tests := []struct {
		name    string
		fault   func(x *faultFixture)
		qpEv    []abi.EventType // the QP owner's events (the client's sink)
		cqEv    []abi.EventType // the CQ owner's
		state   abi.QPState
		flushed []uint64 // wr_ids flushed by the engine, in order
		down    bool
	}{
		{name: "device fatal", fault: func(x *faultFixture) { x.f.event(verbs.AsyncEvent{Type: verbs.EventDeviceFatal}) },
			qpEv: []abi.EventType{abi.EventDeviceFatal}, cqEv: []abi.EventType{abi.EventDeviceFatal}, state: abi.QPStateErr, flushed: []uint64{10, 11, 12, 50, 51}, down: true},
		{name: "helper gone", fault: func(x *faultFixture) { x.f.gone(&verbs.Error{Kind: verbs.ErrHelperGone, Msg: "killed"}) },
			qpEv: []abi.EventType{abi.EventDeviceFatal}, cqEv: []abi.EventType{abi.EventDeviceFatal}, state: abi.QPStateErr, flushed: []uint64{10, 11, 12, 50, 51}, down: true},
		{name: "device fatal after the first receive completed", fault: func(x *faultFixture) {
			x.f.handler(1, []verbs.WC{{WRID: x.recvID(0), Opcode: verbs.WCRecv, QPN: x.q.QPN(), ByteLen: 8}})
			x.f.event(verbs.AsyncEvent{Type: verbs.EventDeviceFatal})
		}, qpEv: []abi.EventType{abi.EventDeviceFatal}, cqEv: []abi.EventType{abi.EventDeviceFatal}, state: abi.QPStateErr, flushed: []uint64{10, 11, 12, 51}, down: true},
		{name: "helper gone after the signaled send completed", fault: func(x *faultFixture) {
			x.f.handler(1, []verbs.WC{{WRID: x.sendID(2), Opcode: verbs.WCRDMAWrite, QPN: x.q.QPN()}})
			x.f.gone(&verbs.Error{Kind: verbs.ErrHelperGone, Msg: "killed"})
		}, qpEv: []abi.EventType{abi.EventDeviceFatal}, cqEv: []abi.EventType{abi.EventDeviceFatal}, state: abi.QPStateErr, flushed: []uint64{50, 51}, down: true},
		{name: "helper gone found by a post", fault: func(x *faultFixture) {
			x.f.mu.Lock()
			x.f.postErr = &verbs.Error{Kind: verbs.ErrHelperGone, Msg: "sending a request: broken pipe"}
			x.f.mu.Unlock()
			x.postSend(t, 13)
		}, qpEv: []abi.EventType{abi.EventDeviceFatal}, cqEv: []abi.EventType{abi.EventDeviceFatal}, state: abi.QPStateErr, flushed: []uint64{10, 11, 12, 50, 51, 13}, down: true},
		{name: "QP fatal", fault: func(x *faultFixture) {
			x.f.event(verbs.AsyncEvent{Type: verbs.EventQPFatal, Element: x.q.dev.qp.Handle, QPN: x.q.QPN()})
		}, qpEv: []abi.EventType{abi.EventQPFatal}, state: abi.QPStateErr},
		{name: "QP request error", fault: func(x *faultFixture) {
			x.f.event(verbs.AsyncEvent{Type: verbs.EventQPReqErr, Element: x.q.dev.qp.Handle, QPN: x.q.QPN()})
		}, qpEv: []abi.EventType{abi.EventQPReqErr}, state: abi.QPStateErr},
		{name: "QP access error", fault: func(x *faultFixture) {
			x.f.event(verbs.AsyncEvent{Type: verbs.EventQPAccessErr, Element: x.q.dev.qp.Handle, QPN: x.q.QPN()})
		}, qpEv: []abi.EventType{abi.EventQPAccessErr}, state: abi.QPStateErr},
		{name: "QP event of another handle", fault: func(x *faultFixture) {
			x.f.event(verbs.AsyncEvent{Type: verbs.EventQPFatal, Element: x.q.dev.qp.Handle + 1, QPN: x.q.QPN()})
		}, state: abi.QPStateRTS},
		{name: "communication established", fault: func(x *faultFixture) {
			x.f.event(verbs.AsyncEvent{Type: verbs.EventCommEst, Element: x.q.dev.qp.Handle, QPN: x.q.QPN()})
		}, qpEv: []abi.EventType{abi.EventCommEst}, state: abi.QPStateRTS},
		{name: "last WQE reached", fault: func(x *faultFixture) {
			x.f.event(verbs.AsyncEvent{Type: verbs.EventQPLastWQE, Element: x.q.dev.qp.Handle, QPN: x.q.QPN()})
		}, qpEv: []abi.EventType{abi.EventQPLastWQE}, state: abi.QPStateRTS},
		{name: "CQ error", fault: func(x *faultFixture) { x.f.event(verbs.AsyncEvent{Type: verbs.EventCQErr, Element: 1}) },
			cqEv: []abi.EventType{abi.EventCQErr}, state: abi.QPStateRTS},
		{name: "port error", fault: func(x *faultFixture) { x.f.event(verbs.AsyncEvent{Type: verbs.EventPortErr, Element: 1}) },
			qpEv: []abi.EventType{abi.EventPortErr}, cqEv: []abi.EventType{abi.EventPortErr}, state: abi.QPStateRTS},
		{name: "port active", fault: func(x *faultFixture) { x.f.event(verbs.AsyncEvent{Type: verbs.EventPortActive, Element: 1}) },
			qpEv: []abi.EventType{abi.EventPortActive}, cqEv: []abi.EventType{abi.EventPortActive}, state: abi.QPStateRTS},
		{name: "GID change", fault: func(x *faultFixture) { x.f.event(verbs.AsyncEvent{Type: verbs.EventGIDChange, Element: 1}) },
			qpEv: []abi.EventType{abi.EventGIDChange}, cqEv: []abi.EventType{abi.EventGIDChange}, state: abi.QPStateRTS},
		{name: "SM change (none on RoCE)", fault: func(x *faultFixture) { x.f.event(verbs.AsyncEvent{Type: verbs.EventSMChange, Element: 1}) },
			state: abi.QPStateRTS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newFaultFixture(t)
			before := len(x.completions())
			var mu sync.Mutex
			var downWhy error
			downs := 0
			x.u.SetDownHandler(func(err error) { mu.Lock(); downWhy = err; downs++; mu.Unlock() })
			tt.fault(x)
			if tt.down {
				waitFor(t, "the QP in ERR", func() bool { return x.q.State() == abi.QPStateErr })
				// The runner flushes the rings after the device's.
				waitFor(t, "flushes", func() bool { return len(x.completions())-before >= len(tt.flushed) })
				waitFor(t, "the link told", func() bool { mu.Lock(); defer mu.Unlock(); return downs > 0 })
			}
			if got := x.q.State(); got != tt.state {
				t.Fatalf("the QP is %v, want %v", got, tt.state)
			}
			if got := x.ev.list(); !slices.Equal(got, tt.qpEv) {
				t.Fatalf("the QP's owner was told %v, want %v", got, tt.qpEv)
			}
			if got := x.cqEv.list(); !slices.Equal(got, tt.cqEv) {
				t.Fatalf("the CQ's owner was told %v, want %v", got, tt.cqEv)
			}
			var flushed []uint64
			for _, c := range x.completions()[before:] {
				if c.Status == abi.StatusWRFlushErr {
					flushed = append(flushed, c.WRID)
				}
			}
			if !slices.Equal(flushed, tt.flushed) {
				t.Fatalf("flushed %v, want %v (completions %+v)", flushed, tt.flushed, x.completions())
			}
			err := x.u.Down()
			mu.Lock()
			defer mu.Unlock()
			if !tt.down {
				if err != nil || downs != 0 {
					t.Fatalf("the uplink is down: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUplinkDown) || downs != 1 || downWhy == nil {
				t.Fatalf("the uplink: %v (told %d times: %v), want down", err, downs, downWhy)
			}
			// Late completions of the device that went away are dropped:
			// each request completes once.
			had := len(x.completions())
			x.f.handler(1, []verbs.WC{{WRID: x.recvID(1), Opcode: verbs.WCRecv, QPN: x.q.QPN()}})
			if n := len(x.completions()); n != had {
				t.Fatalf("%d completions after a late one, want %d", n, had)
			}
			// Posting more after the fault completes at once, flushed.
			x.postSend(t, 99)
			waitFor(t, "the late send flushed", func() bool {
				c := x.completions()
				return len(c) > 0 && c[len(c)-1].WRID == 99 && c[len(c)-1].Status == abi.StatusWRFlushErr
			})
			// New QPs and regions are refused, naming the link and the fix.
			_, err = NewQP(QPConfig{PD: x.pd, Type: abi.QPTypeRC, SendCQ: x.cq, RecvCQ: x.cq, Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if !errors.Is(err, ErrUplinkDown) || !strings.Contains(err.Error(), "verbs link hca0 is down") || !strings.Contains(err.Error(), "vrdma link add hca0 type verbs") {
				t.Fatalf("a new QP on the adapter: %v, want ErrUplinkDown naming hca0 and the fix", err)
			}
			region, rerr := shm.NewRegion("mr2", 4096)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if _, err := RegisterMR(x.pd, region, 0x20000, 4096, abi.AccessLocalWrite); !errors.Is(err, ErrUplinkDown) {
				t.Fatalf("a new region on the adapter: %v, want ErrUplinkDown", err)
			}
			// The link added again: the adapter holds objects of the old
			// device, so it stays; once they are destroyed it moves.
			f2 := &fakeDevice{}
			u2 := NewDeviceUplink("hca0", f2, [][16]byte{{15: 3}})
			x.u.SetSuccessor(u2)
			if _, err := NewQP(QPConfig{PD: x.pd, Type: abi.QPTypeRC, SendCQ: x.cq, RecvCQ: x.cq, Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err == nil || !strings.Contains(err.Error(), "still holds 1 QPs and 1 regions") {
				t.Fatalf("a new QP while the old device's objects live: %v", err)
			}
			x.q.Destroy()
			x.mr.Deregister()
			x.closed = true
			q2, err := NewQP(QPConfig{PD: x.pd, Type: abi.QPTypeRC, SendCQ: x.cq, RecvCQ: x.cq, Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatalf("a new QP after the link came back: %v", err)
			}
			defer q2.Destroy()
			if x.a.Uplink() != u2 || f2.qpn != 1 {
				t.Fatalf("the adapter is on %p (new %p), the new device made %d QPs", x.a.Uplink(), u2, f2.qpn)
			}
		})
	}
}

// sendID is the ID the device was given for the fixture's i'th send (the
// engine's, device_slots.go), recvID for its i'th receive.
func (x *faultFixture) sendID(i int) uint64 {
	x.f.mu.Lock()
	defer x.f.mu.Unlock()
	return x.f.sends[0][i].WRID
}

func (x *faultFixture) recvID(i int) uint64 {
	x.f.mu.Lock()
	defer x.f.mu.Unlock()
	return x.f.recvs[0][i].WRID
}

// postSend posts a signaled SEND with wr_id id and rings.
func (x *faultFixture) postSend(t *testing.T, id uint64) {
	t.Helper()
	sq := x.q.SQ()
	prod := shm.Load32(x.q.mem, abi.RingProdOff)
	w := abi.SendWQE{WRID: id, Opcode: abi.OpSend, Flags: abi.SendSignaled}
	if err := abi.PutSendWQE(x.q.mem[sq.Entry(prod):sq.Entry(prod)+sq.Stride], &w, []abi.SGE{{Addr: 0x10000, Length: 8, LKey: x.lkey}}, nil); err != nil {
		t.Fatal(err)
	}
	shm.Store32(x.q.mem, abi.RingProdOff, prod+1)
	x.q.kickWorker()
}
