package vrdma

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// White-box tests of the direct path: they reach into the library for what
// no application can see (a region's memfd, the moment Modify has its
// reply).

type testEnd struct {
	dev *Device
	pd  *PD
	mr  *MR
	cq  *CQ
	qp  *QP
}

// testPair opens instances a and b in one trust group on a new daemon, each
// with a region, a CQ and an RC QP, and connects the QPs unless !connect.
func testPair(t *testing.T, connect bool) (a, b *testEnd) {
	t.Helper()
	sock := daemontest.Start(t)
	adm, err := DialAdmin(Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	open := func(name string) *testEnd {
		if _, err := adm.CreateInstance(InstanceSpec{Name: name, Adapters: 1, TrustGroup: "g"}); err != nil {
			t.Fatal(err)
		}
		e := &testEnd{}
		if e.dev, err = Open("vrdma0", Options{Socket: sock, Instance: name}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.dev.Close() })
		if e.pd, err = e.dev.AllocPD(); err != nil {
			t.Fatal(err)
		}
		if e.mr, err = e.pd.AllocMR(1<<16, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|ibv.AccessRemoteRead|ibv.AccessRemoteAtomic); err != nil {
			t.Fatal(err)
		}
		if e.cq, err = e.dev.CreateCQ(64); err != nil {
			t.Fatal(err)
		}
		if e.qp, err = e.pd.CreateQP(QPInitAttr{Type: ibv.RC, SendCQ: e.cq, RecvCQ: e.cq, Cap: QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b = open("a"), open("b")
	if connect {
		ea, _ := a.qp.Endpoint(0)
		eb, _ := b.qp.Endpoint(0)
		o := DefaultConnectOptions()
		if err := a.qp.Connect(eb, &o); err != nil {
			t.Fatal(err)
		}
		if err := b.qp.Connect(ea, &o); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// TestDirectPathStopsAtDeregistration: a thread streams WRITEs of a
// counter into the peer's region through the direct path while the peer
// deregisters it. Once DeregMR has returned, nothing may change the
// region's memory any more (seen here through a mapping of its memfd the
// test made before), although the writer goes on until it sees an error.
func TestDirectPathStopsAtDeregistration(t *testing.T) {
	a, b := testPair(t, true)
	fd, err := unix.Dup(b.mr.region.FD())
	if err != nil {
		t.Fatal(err)
	}
	view, err := shm.MapRegion(fd, b.mr.Len())
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	target := view.Bytes()[:8]

	src := a.mr.Bytes()[:8]
	wr := []SendWR{{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}}
	started := make(chan struct{})
	stop := make(chan struct{})
	result := make(chan string, 1)
	go func() {
		wc := make([]WorkCompletion, 1)
		for i := uint64(1); ; i++ {
			binary.LittleEndian.PutUint64(src, i)
			wr[0].ID = i
			if err := a.qp.PostSend(wr); err != nil {
				result <- err.Error()
				return
			}
			for {
				n, err := a.cq.Poll(wc)
				if err != nil {
					result <- err.Error()
					return
				}
				if n == 1 {
					break
				}
			}
			if wc[0].Status != ibv.WCSuccess {
				result <- wc[0].Status.String()
				return
			}
			if i == 100 {
				close(started)
			}
			select {
			case <-stop:
				result <- "still writing"
				return
			default:
			}
		}
	}()
	<-started
	if err := b.mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	after := binary.LittleEndian.Uint64(target)
	select {
	case r := <-result:
		t.Logf("the writer stopped: %s", r)
	case <-time.After(200 * time.Millisecond):
		close(stop)
		t.Logf("the writer stopped: %s", <-result)
	}
	if now := binary.LittleEndian.Uint64(target); now != after {
		t.Fatalf("the region's memory changed after dereg_mr returned: counter %d, then %d", after, now)
	}
}

// TestModifyKeepsAConcurrentError: the QP moves to ERR (a QP_FATAL event:
// its peer is gone) after the daemon answered a Modify to RTS and before
// the caller's Modify returns. The QP must stay in ERR for the library,
// not take the reply's stale RTS.
func TestModifyKeepsAConcurrentError(t *testing.T) {
	a, b := testPair(t, false)
	ea, _ := a.qp.Endpoint(0)
	eb, _ := b.qp.Endpoint(0)
	o := DefaultConnectOptions()
	if err := b.qp.Connect(ea, &o); err != nil {
		t.Fatal(err)
	}
	testHookModified = func(q *QP, st ibv.QPState) {
		if q != a.qp || st != ibv.QPSRTS {
			return
		}
		testHookModified = nil
		if err := b.dev.Close(); err != nil { // the peer's process is gone: a gets QP_FATAL
			t.Error(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			select {
			case ev := <-a.dev.Events():
				if ev.Type == ibv.EventQPFatal && ev.QP == a.qp {
					return
				}
			case <-ctx.Done():
				t.Error("no QP_FATAL event after the peer closed its device")
				return
			}
		}
	}
	defer func() { testHookModified = nil }()
	if err := a.qp.Connect(eb, &o); err != nil {
		t.Fatal(err)
	}
	if st := a.qp.State(); st != ibv.QPSErr {
		t.Fatalf("State() is %v after a QP_FATAL that came during the Modify to RTS, want ERR", st)
	}
}

// TestDirectPathRegionAtMemfdOffset: a peer region that is bytes [N, N+L)
// of its memfd (how the guest library registers application memory) is
// those bytes on the direct path too: WRITE, READ and an atomic at offset x
// of the region reach memfd byte N+x, all in the caller; a WRITE reaching
// past L goes to the daemon, fails with REM_ACCESS_ERR, and leaves the
// memfd bytes after the region alone.
func TestDirectPathRegionAtMemfdOffset(t *testing.T) {
	a, b := testPair(t, true)
	page := uint64(os.Getpagesize())
	owner, err := shm.NewRegion("owner", int(3*page))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	mem := owner.Bytes()
	for i := range mem {
		mem[i] = byte(i*13 + 1)
	}
	const length = 1000
	n := page + 123
	addr := shm.Addr(mem) + n // the owner's address of the region, as a guest library registers it
	var reg proto.RegMRResp
	req := proto.RegMRReq{PD: b.pd.handle, Addr: addr, Length: length, Offset: n,
		Access: uint32(ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic)}
	if _, err := b.pd.d.c.call(proto.OpRegMR, req, &reg, owner.FD()); err != nil {
		t.Fatal(err)
	}
	completion := func(id uint64) WorkCompletion {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		wc := make([]WorkCompletion, 1)
		if _, err := a.cq.PollWait(ctx, wc, 100); err != nil {
			t.Fatal(err)
		}
		if wc[0].ID != id {
			t.Fatalf("completion %+v, want id %d", wc[0], id)
		}
		return wc[0]
	}
	throughDaemon := func() uint64 {
		t.Helper()
		p, err := a.dev.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		return p.Counters.PathMemcpy
	}
	before := throughDaemon()
	src := a.mr.Bytes()
	for i := range src[:64] {
		src[i] = byte(0xA0 + i)
	}
	want := bytes.Clone(mem)

	// WRITE at offset 200 of the region.
	if err := a.qp.PostSend([]SendWR{{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: addr + 200, RKey: reg.RKey}}); err != nil {
		t.Fatal(err)
	}
	if wc := completion(1); wc.Status != ibv.WCSuccess {
		t.Fatalf("write: %+v", wc)
	}
	copy(want[n+200:], src[:64])
	if !bytes.Equal(mem, want) {
		t.Fatalf("after a WRITE at offset 200: memfd bytes %d.. are %x, want %x", n+200, mem[n+200:n+264], want[n+200:n+264])
	}
	// READ at offset 500.
	if err := a.qp.PostSend([]SendWR{{ID: 2, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(1000, 64)}, RemoteAddr: addr + 500, RKey: reg.RKey}}); err != nil {
		t.Fatal(err)
	}
	if wc := completion(2); wc.Status != ibv.WCSuccess {
		t.Fatalf("read: %+v", wc)
	}
	if !bytes.Equal(src[1000:1064], mem[n+500:n+564]) {
		t.Fatalf("a READ at offset 500 got %x, memfd bytes %d.. are %x", src[1000:1064], n+500, mem[n+500:n+564])
	}
	// FETCH_AND_ADD on the word at memfd byte page+128: offset 5 of the
	// region, aligned in memory as in the owner's address space.
	word := page + 128
	binary.LittleEndian.PutUint64(mem[word:], 40)
	binary.LittleEndian.PutUint64(want[word:], 42)
	if err := a.qp.PostSend([]SendWR{{ID: 3, Opcode: ibv.WRAtomicFetchAndAdd, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(2048, 8)}, RemoteAddr: addr + (word - n), RKey: reg.RKey, CompareAdd: 2}}); err != nil {
		t.Fatal(err)
	}
	if wc := completion(3); wc.Status != ibv.WCSuccess {
		t.Fatalf("fetch-and-add: %+v", wc)
	}
	if got := binary.LittleEndian.Uint64(src[2048:]); got != 40 || !bytes.Equal(mem, want) {
		t.Fatalf("fetch-and-add returned %d (want 40), word now %d (want 42)", got, binary.LittleEndian.Uint64(mem[word:]))
	}
	if through := throughDaemon() - before; through != 0 {
		t.Fatalf("%d of the requests went through the daemon: the direct path did not take the region", through)
	}

	// A WRITE one byte past the region's end.
	if err := a.qp.PostSend([]SendWR{{ID: 4, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 16)}, RemoteAddr: addr + length - 15, RKey: reg.RKey}}); err != nil {
		t.Fatal(err)
	}
	if wc := completion(4); wc.Status != ibv.WCRemAccessErr {
		t.Fatalf("a WRITE one byte past the region: %+v, want REM_ACCESS_ERR", wc)
	}
	if !bytes.Equal(mem, want) {
		t.Fatal("a refused WRITE changed the memfd")
	}
}
