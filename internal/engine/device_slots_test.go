package engine

import (
	"errors"
	"sync"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
	"golang.org/x/sys/unix"
)

// completingDevice is a recording device that completes every signaled
// send on its own goroutine, as a device's push reader delivers them, and
// refuses a batch that would make it hold more than the QP's depth with
// ENOMEM, as a device's ibv_post_send does.
type completingDevice struct {
	fakeDevice
	mu   sync.Mutex
	held map[uint32]int // sends the device holds, by QP handle
	caps map[uint32]verbs.QPCap
	scq  map[uint32]uint32 // the send CQ's handle, by QP handle
	wg   sync.WaitGroup
	last chan struct{} // closed when the previous batch's completions are in: a device completes in order
}

func (f *completingDevice) CreateQP(s, r verbs.CQ, c verbs.QPCap) (verbs.QP, error) {
	q, err := f.fakeDevice.CreateQP(s, r, c)
	f.mu.Lock()
	if f.caps == nil {
		f.caps, f.held, f.scq = map[uint32]verbs.QPCap{}, map[uint32]int{}, map[uint32]uint32{}
	}
	f.caps[q.Handle], f.scq[q.Handle] = c, s.Handle
	f.mu.Unlock()
	return q, err
}

var errDeviceFull = errors.New("the device's send queue is full")

func (f *completingDevice) PostSend(q verbs.QP, wrs []verbs.SendWR) error {
	f.mu.Lock()
	if f.held[q.Handle]+len(wrs) > int(f.caps[q.Handle].MaxSendWR) {
		f.mu.Unlock()
		return errors.Join(errDeviceFull, unix.ENOMEM)
	}
	f.held[q.Handle] += len(wrs)
	cq := f.scq[q.Handle]
	f.mu.Unlock()
	if err := f.fakeDevice.PostSend(q, wrs); err != nil {
		return err
	}
	wcs := make([]verbs.WC, len(wrs))
	for i, w := range wrs {
		wcs[i] = verbs.WC{WRID: w.WRID, Opcode: verbs.WCSend, QPN: q.QPN}
	}
	f.mu.Lock()
	prev, mine := f.last, make(chan struct{})
	f.last = mine
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer close(mine)
		if prev != nil {
			<-prev
		}
		for i := range wcs {
			f.mu.Lock()
			f.held[q.Handle]--
			f.mu.Unlock()
			f.handler(cq, wcs[i:i+1])
		}
	}()
	return nil
}

// deviceQPInRTS makes an RC QP of a bound adapter, connected (RTS), with
// a registered region of 4 KiB at 0x10000; f's handler is the uplink's.
func deviceQPInRTS(t *testing.T, f Device, caps proto.QPCaps) (*QP, *CQ, uint32) {
	t.Helper()
	h := NewHost()
	t.Cleanup(h.Close)
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(a)
	if err := a.Bind(NewDeviceUplink("hca0", f, [][16]byte{{15: 1}})); err != nil {
		t.Fatal(err)
	}
	pd := a.NewPD()
	cq, err := NewCQ(64)
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
	t.Cleanup(mr.Deregister)
	q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{}, Caps: caps})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
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
	lkey, _ := mr.DeviceKeys()
	return q, cq, lkey
}

// clientPost writes a signaled SEND into the ring as the guest library
// does, ENOMEM when the ring has no free slot by the consumer word the
// daemon writes; ring rings the doorbell after it.
func clientPost(q *QP, prod *uint32, wrid uint64, lkey uint32, ring bool) error {
	sq := q.SQ()
	if *prod-shm.Load32(q.mem, abi.RingConsOff) >= uint32(sq.Entries) {
		return unix.ENOMEM
	}
	w := abi.SendWQE{WRID: wrid, Opcode: abi.OpSend, Flags: abi.SendSignaled}
	if err := abi.PutSendWQE(q.mem[sq.Entry(*prod):sq.Entry(*prod)+sq.Stride], &w, []abi.SGE{{Addr: 0x10000, Length: 16, LKey: lkey}}, nil); err != nil {
		return err
	}
	*prod++
	shm.Store32(q.mem, abi.RingProdOff, *prod)
	if ring {
		q.kickWorker()
	}
	return nil
}

// TestDeviceSendSlotsFreedAtCompletion: a bound QP's send slots are free
// when the device completes their requests, not when they are posted. With
// the QP's depth outstanding (posted to the device, none completed) one
// more is refused at post with ENOMEM, as ibverbs refuses it; a client
// that posts all it can on every completion, for many rounds, never makes
// the device hold more than its depth (which a device refuses with ENOMEM,
// a fatal QP error) and gets every completion, in order, successful.
func TestDeviceSendSlotsFreedAtCompletion(t *testing.T) {
	const depth, rounds = 8, 300
	f := &completingDevice{}
	q, cq, lkey := deviceQPInRTS(t, f, proto.QPCaps{MaxSendWR: depth, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1})
	if q.SQ().Entries != depth {
		t.Fatalf("the send ring has %d slots, want the depth %d", q.SQ().Entries, depth)
	}
	// The device holds its completions until it is let.
	entered, block := make(chan struct{}, 1), make(chan struct{})
	var unblock sync.Once
	t.Cleanup(func() { unblock.Do(func() { close(block) }) }) // before the QP's: its runner may wait here
	f.fakeDevice.mu.Lock()
	f.fakeDevice.atPost = func() { entered <- struct{}{}; <-block }
	f.fakeDevice.mu.Unlock()

	var prod uint32
	next := uint64(1000)
	for i := 0; i < depth; i++ { // one ibv_post_send of depth requests
		if err := clientPost(q, &prod, next, lkey, i == depth-1); err != nil {
			t.Fatalf("post %d of the depth %d: %v", i+1, depth, err)
		}
		next++
	}
	<-entered // the device has them, and has completed none
	if err := clientPost(q, &prod, next, lkey, true); !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("a post with the depth %d outstanding: %v, want ENOMEM", depth, err)
	}
	f.fakeDevice.mu.Lock()
	f.fakeDevice.atPost = nil
	f.fakeDevice.mu.Unlock()
	unblock.Do(func() { close(block) })

	cring := cq.Ring()
	var ccons uint32
	want := uint64(1000)
	for r := 0; r < rounds; r++ {
		waitFor(t, "completion", func() bool { return shm.Load32(cq.mem, cring.Offset+abi.RingProdOff) != ccons })
		for shm.Load32(cq.mem, cring.Offset+abi.RingProdOff) != ccons {
			var c abi.CQE
			abi.ParseCQE(cq.mem[cring.Entry(ccons):], &c)
			ccons++
			shm.Store32(cq.mem, cring.Offset+abi.RingConsOff, ccons)
			if c.Status != abi.StatusSuccess || c.WRID != want || c.Opcode != abi.WCSend {
				t.Fatalf("round %d: completion %+v, want wr_id %d, SEND, success (the QP is %v)", r, c, want, q.State())
			}
			want++
		}
		for r < rounds-1 { // all it can
			err := clientPost(q, &prod, next, lkey, false)
			if errors.Is(err, unix.ENOMEM) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			next++
		}
		q.kickWorker()
	}
	waitFor(t, "the last completions", func() bool {
		for shm.Load32(cq.mem, cring.Offset+abi.RingProdOff) != ccons {
			var c abi.CQE
			abi.ParseCQE(cq.mem[cring.Entry(ccons):], &c)
			ccons++
			shm.Store32(cq.mem, cring.Offset+abi.RingConsOff, ccons)
			if c.Status != abi.StatusSuccess || c.WRID != want {
				t.Fatalf("completion %+v, want wr_id %d, success", c, want)
			}
			want++
		}
		return want == next
	})
	if st := q.State(); st != abi.QPStateRTS {
		t.Fatalf("after %d rounds the QP is %v, want RTS", rounds, st)
	}
	if next-1000 < rounds {
		t.Fatalf("%d requests in %d rounds", next-1000, rounds)
	}
	f.wg.Wait()
}
