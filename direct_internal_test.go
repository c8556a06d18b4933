package vrdma

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/daemontest"
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
		if e.mr, err = e.pd.AllocMR(1<<16, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic); err != nil {
			t.Fatal(err)
		}
		if e.cq, err = e.dev.CreateCQ(64); err != nil {
			t.Fatal(err)
		}
		if e.qp, err = e.pd.CreateQP(QPInitAttr{Type: RC, SendCQ: e.cq, RecvCQ: e.cq, Cap: QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
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
	wr := []SendWR{{Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}}
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
			if wc[0].Status != WCSuccess {
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
	testHookModified = func(q *QP, st QPState) {
		if q != a.qp || st != QPSRTS {
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
				if ev.Type == EventQPFatal && ev.QP == a.qp {
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
	if st := a.qp.State(); st != QPSErr {
		t.Fatalf("State() is %v after a QP_FATAL that came during the Modify to RTS, want ERR", st)
	}
}
