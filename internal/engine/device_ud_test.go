package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
)

// TestAdapterUDOnDevice: a bound adapter's UD QP is the device's (its
// QPN), moved through its states with its Q_Key; an instance's address
// handle is made on the device with the GRH attributes; the runner posts
// UD sends naming the device's AH, the remote QPN and Q_Key in one batch;
// a receive's completion carries the source QP, SL and the GRH flag; a
// datagram's completion frees its send slot, and the one the device still
// holds is flushed once when the device goes away (device_slots.go: one
// record for RC and UD); a UD QP asking for inline data is refused; and a
// send naming an address handle of another PD completes with
// LOC_QP_OP_ERR without reaching the device.
func TestAdapterUDOnDevice(t *testing.T) {
	h := NewHost()
	t.Cleanup(h.Close)
	f := &fakeDevice{}
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(a)
	if err := a.NewPD().CreateDeviceAH(1, qpstate.AddressVector{}); err == nil {
		t.Fatal("an unbound adapter made a device AH")
	}
	if err := a.Bind(NewDeviceUplink("hca0", f, [][16]byte{{15: 1}, {10: 0xff, 11: 0xff, 12: 10, 15: 15}})); err != nil {
		t.Fatal(err)
	}
	pd, other := a.NewPD(), a.NewPD()
	cq, err := NewCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	region, err := shm.NewRegion("mr", 8192)
	if err != nil {
		t.Fatal(err)
	}
	const vaddr = 0x7f0000010000
	mr, err := RegisterMR(pd, region, vaddr, 8192, abi.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Deregister()
	lkey, _ := mr.DeviceKeys()

	peer := [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 16}
	av := qpstate.AddressVector{DGID: peer, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x20, FlowLabel: 0x12345, SL: 2, PortNum: 1}
	if err := pd.CreateDeviceAH(5, av); err != nil {
		t.Fatal(err)
	}
	if err := pd.CreateDeviceAH(5, av); err == nil {
		t.Fatal("a second device AH for one handle")
	}
	if err := other.CreateDeviceAH(6, av); err != nil {
		t.Fatal(err)
	}
	want := verbs.AHAttr{DGID: peer, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x20, FlowLabel: 0x12345, SL: 2, IsGlobal: true}
	if len(f.ahs) != 2 || f.ahs[0] != want {
		t.Fatalf("the device made AHs %+v, want %+v first", f.ahs, want)
	}

	q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeUD, SendCQ: cq, RecvCQ: cq, Events: &events{},
		Caps: proto.QPCaps{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// Inline data on a UD QP is not carried yet: refused at create,
	// naming the link, with nothing left on the device.
	_, err = NewQP(QPConfig{PD: pd, Type: abi.QPTypeUD, SendCQ: cq, RecvCQ: cq, Events: &events{},
		Caps: proto.QPCaps{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
	if !errors.Is(err, ErrDeviceQP) || !strings.Contains(err.Error(), "hca0") || !strings.Contains(err.Error(), "max_inline_data 0") || f.qpn != 1 {
		t.Fatalf("a UD QP asking for inline data: %v (device QPs made %d), want ErrDeviceQP naming hca0", err, f.qpn)
	}
	defer q.Destroy()
	if f.udQPs != 1 || q.QPN() != 0xabc001 {
		t.Fatalf("%d device UD QPs, QPN %#x; want 1, the device's 0xabc001", f.udQPs, q.QPN())
	}
	steps := []struct {
		attr qpstate.Attr
		mask qpstate.Mask
	}{
		{qpstate.Attr{State: abi.QPStateInit, PortNum: 1, QKey: 0x11111111}, qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskQKey},
		{qpstate.Attr{State: abi.QPStateRTR}, qpstate.MaskState},
		{qpstate.Attr{State: abi.QPStateRTS, SQPSN: 0x42}, qpstate.MaskState | qpstate.MaskSQPSN},
	}
	for _, s := range steps {
		if _, err := q.Modify(&s.attr, s.mask); err != nil {
			t.Fatal(err)
		}
	}
	if m := f.udModify; len(m) != 3 || m[0] != [3]uint32{1, 0x11111111, 0} || m[1] != [3]uint32{2, 0x11111111, 0} || m[2] != [3]uint32{3, 0x11111111, 0x42} {
		t.Fatalf("the device's UD QP was moved with %v (state, qkey, sq_psn)", m)
	}
	if len(f.modify) != 0 {
		t.Fatalf("a UD QP was moved as an RC one: %+v", f.modify)
	}

	// A receive: room for the GRH and the datagram.
	rq := q.RQ()
	if err := abi.PutRecvWQE(q.mem[rq.Entry(0):rq.Entry(0)+rq.Stride], 100, []abi.SGE{{Addr: vaddr, Length: 40 + 1024, LKey: lkey}}); err != nil {
		t.Fatal(err)
	}
	shm.Store32(q.mem, rq.Offset+abi.RingProdOff, 1)
	q.kickWorker()
	waitFor(t, "receive batch", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.recvs) == 1 })

	// Two datagrams in one doorbell: one batch naming the device's AH.
	sq := q.SQ()
	for i := uint32(0); i < 2; i++ {
		w := abi.SendWQE{WRID: 7 + uint64(i), Opcode: abi.OpSend, Flags: abi.SendSignaled, AH: 5, RemoteQPN: 0x1234, RemoteQKey: 0x11111111}
		if i == 1 {
			w.Opcode, w.Imm = abi.OpSendImm, 0x01020304
		}
		if err := abi.PutSendWQE(q.mem[sq.Entry(i):sq.Entry(i)+sq.Stride], &w, []abi.SGE{{Addr: vaddr + 4096, Length: 512, LKey: lkey}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	shm.Store32(q.mem, abi.RingProdOff, 2)
	q.kickWorker()
	waitFor(t, "UD send batch", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.udSends) > 0 })
	f.mu.Lock()
	s := f.udSends
	f.mu.Unlock()
	// The device knows the second by the engine's ID of send index 1
	// (device_slots.go), and the client's 8 comes back with its completion.
	wantWR := verbs.UDSendWR{WRID: devSendTag | 1, Opcode: verbs.WRSendWithImm, Flags: verbs.SendSignaled, Imm: netOrder(0x01020304), AH: 0x71, RemoteQPN: 0x1234, RemoteQKey: 0x11111111}
	if len(s) != 1 || len(s[0]) != 2 || s[0][1].SGEs[0] != (verbs.SGE{MR: 0, Length: 512, Offset: 4096}) {
		t.Fatalf("the device got UD batches %+v, want one of two", s)
	}
	got := s[0][1]
	if got.WRID != wantWR.WRID || got.Opcode != wantWR.Opcode || got.Flags != wantWR.Flags || got.Imm != wantWR.Imm || got.AH != wantWR.AH ||
		got.RemoteQPN != wantWR.RemoteQPN || got.RemoteQKey != wantWR.RemoteQKey || s[0][0].Opcode != verbs.WRSend {
		t.Fatalf("the device got %+v, want %+v", got, wantWR)
	}
	if len(f.sends) != 0 {
		t.Fatalf("UD sends went out as RC ones: %+v", f.sends)
	}

	// A datagram's completion: source QP, SL and the GRH in front.
	f.handler(1, []verbs.WC{{WRID: f.recvs[0][0].WRID, Opcode: verbs.WCRecv, ByteLen: 40 + 512, QPN: q.QPN(), SrcQP: 0x1234, Flags: verbs.WCFlagGRH, SL: 3}})
	var c abi.CQE
	abi.ParseCQE(cq.mem[cq.ring.Entry(0):], &c)
	if c.WRID != 100 || c.SrcQP != 0x1234 || c.Flags&abi.WCWithGRH == 0 || c.SL != 3 || c.ByteLen != 40+512 || c.Status != abi.StatusSuccess {
		t.Fatalf("completion %+v", c)
	}
	// The first datagram's completion frees its send slot, as an RC
	// send's does; the second stays the device's.
	f.handler(1, []verbs.WC{{WRID: s[0][0].WRID, Opcode: verbs.WCSend, QPN: q.QPN()}})
	abi.ParseCQE(cq.mem[cq.ring.Entry(1):], &c)
	if c.WRID != 7 || c.Opcode != abi.WCSend || c.Status != abi.StatusSuccess {
		t.Fatalf("the first datagram's completion %+v, want wr_id 7", c)
	}
	if n := shm.Load32(q.mem, abi.RingConsOff); n != 1 {
		t.Fatalf("after the first datagram's completion the consumer index is %d, want 1", n)
	}

	// Another PD's address handle is not the QP's to name.
	w := abi.SendWQE{WRID: 9, Opcode: abi.OpSend, Flags: abi.SendSignaled, AH: 6, RemoteQPN: 0x1234, RemoteQKey: 0x11111111}
	if err := abi.PutSendWQE(q.mem[sq.Entry(2):sq.Entry(2)+sq.Stride], &w, []abi.SGE{{Addr: vaddr + 4096, Length: 8, LKey: lkey}}, nil); err != nil {
		t.Fatal(err)
	}
	shm.Store32(q.mem, abi.RingProdOff, 3)
	q.kickWorker()
	waitFor(t, "error completion", func() bool { return shm.Load32(cq.mem, cq.ring.Offset+abi.RingProdOff) == 3 })
	abi.ParseCQE(cq.mem[cq.ring.Entry(2):], &c)
	if c.WRID != 9 || c.Status != abi.StatusLocQPOpErr || q.State() != abi.QPStateErr {
		t.Fatalf("a send naming another PD's AH: %+v, QP %v; want LOC_QP_OP_ERR and ERR", c, q.State())
	}
	if f.mu.Lock(); len(f.udSends) != 1 {
		t.Fatalf("the device was handed %d UD batches, want 1", len(f.udSends))
	}
	f.mu.Unlock()

	// The device goes away: the datagram it still holds (wr_id 8) is
	// flushed from the same record, once.
	f.event(verbs.AsyncEvent{Type: verbs.EventDeviceFatal})
	waitFor(t, "the held datagram flushed", func() bool { return shm.Load32(cq.mem, cq.ring.Offset+abi.RingProdOff) >= 4 })
	abi.ParseCQE(cq.mem[cq.ring.Entry(3):], &c)
	if c.WRID != 8 || c.Opcode != abi.WCSend || c.Status != abi.StatusWRFlushErr {
		t.Fatalf("after the device went away: %+v, want wr_id 8 flushed", c)
	}
	f.handler(1, []verbs.WC{{WRID: s[0][1].WRID, Opcode: verbs.WCSend, QPN: q.QPN()}})
	if n := shm.Load32(cq.mem, cq.ring.Offset+abi.RingProdOff); n != 4 {
		t.Fatalf("%d completions after a late one of the device that went away, want 4", n)
	}

	pd.DestroyDeviceAH(5)
	pd.DestroyDeviceAH(5)
	if len(f.ahsGone) != 1 || f.ahsGone[0].Handle != 0x71 {
		t.Fatalf("destroyed device AHs %+v, want 0x71 once", f.ahsGone)
	}
}
