package vrdma_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemontest"
)

type directEnd struct {
	dev *vrdma.Device
	pd  *vrdma.PD
	mr  *vrdma.MR
	cq  *vrdma.CQ
	qp  *vrdma.QP
}

// directPair connects two RC QPs on instances a and b; group puts both
// instances in one trust group ("" = they do not trust each other).
func directPair(t testing.TB, group string, access ibv.Access) (a, b *directEnd) {
	t.Helper()
	sock := daemontest.Start(t)
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	open := func(name string) *directEnd {
		if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: name, Adapters: 1, TrustGroup: group}); err != nil {
			t.Fatal(err)
		}
		e := &directEnd{}
		if e.dev, err = vrdma.Open("vrdma0", vrdma.Options{Socket: sock, Instance: name}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.dev.Close() })
		e.pd, _ = e.dev.AllocPD()
		if e.mr, err = e.pd.AllocMR(1<<16, access); err != nil {
			t.Fatal(err)
		}
		e.cq, _ = e.dev.CreateCQ(64)
		if e.qp, err = e.pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: e.cq, RecvCQ: e.cq,
			Cap: vrdma.QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 4, MaxRecvSGE: 4}}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b = open("a"), open("b")
	ea, _ := a.qp.Endpoint(0)
	eb, _ := b.qp.Endpoint(0)
	o := vrdma.DefaultConnectOptions()
	if err := a.qp.Connect(eb, &o); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Connect(ea, &o); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func (e *directEnd) completion(t *testing.T) vrdma.WorkCompletion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]vrdma.WorkCompletion, 1)
	if _, err := e.cq.PollWait(ctx, wc, 100); err != nil {
		t.Fatal(err)
	}
	return wc[0]
}

func (e *directEnd) daemonMessages(t *testing.T) uint64 {
	t.Helper()
	p, err := e.dev.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	return p.Counters.PathMemcpy
}

const directAccess = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic

// TestDirectPathOneSidedOperations: between trusting instances WRITE, READ
// and both atomics run in the caller, with the daemon's results, and the
// daemon's data path sees none of them; between instances that do not
// trust each other the same requests go through the daemon.
func TestDirectPathOneSidedOperations(t *testing.T) {
	for _, tc := range []struct {
		group  string
		direct bool
	}{{"g", true}, {"", false}} {
		t.Run("trust="+tc.group, func(t *testing.T) {
			a, b := directPair(t, tc.group, directAccess)
			if _, reason := a.qp.Path(); strings.Contains(reason, "trusted") != tc.direct {
				t.Fatalf("path reason %q", reason)
			}
			before := a.daemonMessages(t)
			src, dst := a.mr.Bytes(), b.mr.Bytes()
			for i := range src[:4096] {
				src[i] = byte(i * 13)
			}
			// WRITE from four SGEs.
			sgl := []ibv.SGE{a.mr.SGE(0, 1000), a.mr.SGE(1000, 24), a.mr.SGE(1024, 2048), a.mr.SGE(3072, 1024)}
			if err := a.qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: sgl, RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()}}); err != nil {
				t.Fatal(err)
			}
			if wc := a.completion(t); wc.Status != ibv.WCSuccess || wc.Opcode != ibv.WCRDMAWrite || wc.ID != 1 || wc.ByteLen != 4096 || wc.QPNum != a.qp.QPN() {
				t.Fatalf("write completion %+v", wc)
			}
			if !bytes.Equal(dst[8192:8192+4096], src[:4096]) {
				t.Fatal("written bytes differ")
			}
			// READ into two SGEs.
			for i := range dst[:512] {
				dst[i] = byte(i * 7)
			}
			if err := a.qp.PostSend([]vrdma.SendWR{{ID: 2, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
				SGL: []ibv.SGE{a.mr.SGE(20000, 100), a.mr.SGE(30000, 412)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}}); err != nil {
				t.Fatal(err)
			}
			if wc := a.completion(t); wc.Status != ibv.WCSuccess || wc.Opcode != ibv.WCRDMARead || wc.ByteLen != 512 {
				t.Fatalf("read completion %+v", wc)
			}
			if !bytes.Equal(src[20000:20100], dst[:100]) || !bytes.Equal(src[30000:30412], dst[100:512]) {
				t.Fatal("read bytes differ")
			}
			// Compare-and-swap, then fetch-and-add, on one word.
			binary.LittleEndian.PutUint64(dst[64:], 41)
			atomics := []struct {
				op         ibv.Opcode
				cmp, swap  uint64
				orig, then uint64
			}{
				{ibv.WRAtomicCmpAndSwp, 40, 7, 41, 41}, // compare fails
				{ibv.WRAtomicCmpAndSwp, 41, 7, 41, 7},
				{ibv.WRAtomicFetchAndAdd, 5, 0, 7, 12},
			}
			for i, at := range atomics {
				if err := a.qp.PostSend([]vrdma.SendWR{{ID: uint64(10 + i), Opcode: at.op, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(40000, 8)},
					RemoteAddr: b.mr.Addr() + 64, RKey: b.mr.RKey(), CompareAdd: at.cmp, Swap: at.swap}}); err != nil {
					t.Fatal(err)
				}
				if wc := a.completion(t); wc.Status != ibv.WCSuccess || wc.ByteLen != 8 {
					t.Fatalf("atomic %d completion %+v", i, wc)
				}
				if got, now := binary.LittleEndian.Uint64(src[40000:]), binary.LittleEndian.Uint64(dst[64:]); got != at.orig || now != at.then {
					t.Fatalf("atomic %d: original %d (want %d), word %d (want %d)", i, got, at.orig, now, at.then)
				}
			}
			// Unsignaled: no completion.
			if err := a.qp.PostSend([]vrdma.SendWR{{ID: 99, Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(100 * time.Millisecond)
			wc := make([]vrdma.WorkCompletion, 1)
			for time.Now().Before(deadline) {
				if n, _ := a.cq.Poll(wc); n > 0 {
					t.Fatalf("an unsignaled request completed: %+v", wc[0])
				}
			}
			through := a.daemonMessages(t) - before
			if tc.direct && through != 0 {
				t.Fatalf("%d requests went through the daemon between trusting instances", through)
			}
			if !tc.direct && through != 6 {
				t.Fatalf("%d requests went through the daemon, want all 6", through)
			}
		})
	}
}

// TestDirectPathErrorsAreTheDaemons: a request the checks would refuse
// takes the daemon's path and gets the standard completion and state.
func TestDirectPathErrorsAreTheDaemons(t *testing.T) {
	tests := []struct {
		name   string
		access ibv.Access
		wr     func(a, b *directEnd) vrdma.SendWR
		want   ibv.Status
	}{
		{"wrong rkey", directAccess, func(a, b *directEnd) vrdma.SendWR {
			return vrdma.SendWR{Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x1}
		}, ibv.WCRemAccessErr},
		{"past the region", directAccess, func(a, b *directEnd) vrdma.SendWR {
			return vrdma.SendWR{Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr() + 1<<16 - 32, RKey: b.mr.RKey()}
		}, ibv.WCRemAccessErr},
		{"region without remote read", ibv.AccessLocalWrite | ibv.AccessRemoteWrite, func(a, b *directEnd) vrdma.SendWR {
			return vrdma.SendWR{Opcode: ibv.WRRDMARead, SGL: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
		}, ibv.WCRemAccessErr},
		{"misaligned atomic", directAccess, func(a, b *directEnd) vrdma.SendWR {
			return vrdma.SendWR{Opcode: ibv.WRAtomicFetchAndAdd, SGL: []ibv.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr() + 4, RKey: b.mr.RKey(), CompareAdd: 1}
		}, ibv.WCRemInvReqErr},
		{"bad lkey", directAccess, func(a, b *directEnd) vrdma.SendWR {
			return vrdma.SendWR{Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{{Addr: a.mr.Addr(), Length: 64, LKey: a.mr.LKey() + 1}}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
		}, ibv.WCLocProtErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := directPair(t, "g", tt.access)
			before := append([]byte(nil), b.mr.Bytes()...)
			wr := tt.wr(a, b)
			wr.ID, wr.Flags = 5, ibv.SendSignaled
			if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
			wc := a.completion(t)
			var we *vrdma.WCError
			if !errors.As(wc.Err(), &we) || we.Status != tt.want || wc.ID != 5 {
				t.Fatalf("completion %+v, want %v", wc, tt.want)
			}
			if attr, _, err := a.qp.Query(); err != nil || attr.State != ibv.QPSErr {
				t.Fatalf("QP state %v (%v), want ERR", attr.State, err)
			}
			if !bytes.Equal(before, b.mr.Bytes()) {
				t.Fatal("the target region changed")
			}
		})
	}
}

// TestDirectPathKeepsOrder: a one-sided request posted behind one still
// queued for the daemon (a SEND waiting for a receive) must not overtake it.
func TestDirectPathKeepsOrder(t *testing.T) {
	a, b := directPair(t, "g", directAccess)
	copy(a.mr.Bytes(), "written after the send")
	if err := a.qp.PostSend([]vrdma.SendWR{
		{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(100, 16)}},
		{ID: 2, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 22)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	// Also a request posted separately, later.
	if err := a.qp.PostSend([]vrdma.SendWR{{ID: 3, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 22)}, RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the SEND is parked on RNR meanwhile
	if n, _ := a.cq.Poll(make([]vrdma.WorkCompletion, 4)); n != 0 {
		t.Fatalf("%d requests completed before the blocked SEND", n)
	}
	if bytes.Contains(b.mr.Bytes()[4096:4200], []byte("written")) || bytes.Contains(b.mr.Bytes()[8192:8300], []byte("written")) {
		t.Fatal("a WRITE overtook the SEND queued before it")
	}
	if err := b.qp.PostRecv([]vrdma.RecvWR{{ID: 7, SGL: []ibv.SGE{b.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for len(ids) < 3 {
		if wc := a.completion(t); wc.Status == ibv.WCSuccess {
			ids = append(ids, wc.ID)
		} else {
			t.Fatalf("completion %+v", wc)
		}
	}
	if ids[0] != 1 || ids[1] != 2 || ids[2] != 3 {
		t.Fatalf("completion order %v, want [1 2 3]", ids)
	}
	if !bytes.Equal(b.mr.Bytes()[4096:4118], []byte("written after the send")) || !bytes.Equal(b.mr.Bytes()[8192:8214], []byte("written after the send")) {
		t.Fatal("the writes did not land")
	}
}

// TestDirectPathDeregisteredRegion: a WRITE through a mapping the library
// cached before the peer deregistered the region must not reach it: it
// completes with REM_ACCESS_ERR, as on the daemon's path, and the QP goes
// to ERR.
func TestDirectPathDeregisteredRegion(t *testing.T) {
	a, b := directPair(t, "g", directAccess)
	wr := vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
	before := a.daemonMessages(t)
	if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	if wc := a.completion(t); wc.Status != ibv.WCSuccess {
		t.Fatalf("first write: %+v", wc)
	}
	if n := a.daemonMessages(t) - before; n != 0 {
		t.Fatalf("the first write went through the daemon (%d messages): the test needs the direct path", n)
	}
	if err := b.mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	wr.ID = 2
	if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	if wc := a.completion(t); wc.Status != ibv.WCRemAccessErr || wc.ID != 2 {
		t.Fatalf("write after the peer's dereg_mr: %+v (%v), want REM_ACCESS_ERR", wc, wc.Status)
	}
	if st := a.qp.State(); st != ibv.QPSErr {
		t.Fatalf("requester QP in %v after REM_ACCESS_ERR, want ERR", st)
	}
}

// TestDirectPathCompletionOrder: a signaled SEND whose completion waits
// in the ring, then a WRITE that runs in the library: Poll returns them in
// the order they completed, SEND first.
func TestDirectPathCompletionOrder(t *testing.T) {
	a, b := directPair(t, "g", directAccess)
	if err := b.qp.PostRecv([]vrdma.RecvWR{{ID: 7, SGL: []ibv.SGE{b.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 16)}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.cq.Wait(ctx); err != nil { // the SEND's completion is in the ring, not polled
		t.Fatal(err)
	}
	before := a.daemonMessages(t)
	if err := a.qp.PostSend([]vrdma.SendWR{{ID: 2, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 16)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if n := a.daemonMessages(t) - before; n != 0 {
		t.Fatalf("the write went through the daemon (%d messages): the test needs the direct path", n)
	}
	first, second := a.completion(t), a.completion(t)
	if first.ID != 1 || second.ID != 2 {
		t.Fatalf("completions polled as %d then %d, want the SEND (1) then the WRITE (2)", first.ID, second.ID)
	}
}

// TestDirectPathCompletionOrderRacing: a SEND, then, as soon as its
// message has arrived, a WRITE, many times: the WRITE sometimes finds the
// SEND done in the daemon a moment before the daemon pushed its
// completion. The completions come out in the order posted every time.
func TestDirectPathCompletionOrderRacing(t *testing.T) {
	a, b := directPair(t, "g", directAccess)
	wc := make([]vrdma.WorkCompletion, 2)
	rwc := make([]vrdma.WorkCompletion, 1)
	poll := func(cq *vrdma.CQ, out []vrdma.WorkCompletion, what string) {
		t.Helper()
		got := 0
		deadline := time.Now().Add(10 * time.Second)
		for got < len(out) {
			n, err := cq.Poll(out[got:])
			if err != nil {
				t.Fatal(err)
			}
			if got += n; got < len(out) && time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d completions", what, got, len(out))
			}
		}
	}
	before := a.daemonMessages(t)
	for i := uint64(0); i < 3000; i++ {
		if err := b.qp.PostRecv([]vrdma.RecvWR{{ID: i, SGL: []ibv.SGE{b.mr.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.PostSend([]vrdma.SendWR{{ID: 2 * i, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 8)}}}); err != nil {
			t.Fatal(err)
		}
		poll(b.cq, rwc, "the SEND's receive") // the daemon is finishing the SEND now
		if err := a.qp.PostSend([]vrdma.SendWR{{ID: 2*i + 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey()}}); err != nil {
			t.Fatal(err)
		}
		poll(a.cq, wc, "the SEND and the WRITE")
		if wc[0].ID != 2*i || wc[1].ID != 2*i+1 || wc[0].Status != ibv.WCSuccess || wc[1].Status != ibv.WCSuccess {
			t.Fatalf("round %d: completions %d (%v) then %d (%v), want the SEND %d then the WRITE %d", i, wc[0].ID, wc[0].Status, wc[1].ID, wc[1].Status, 2*i, 2*i+1)
		}
	}
	t.Logf("%d of 3000 WRITEs ran in the library", 3000-(a.daemonMessages(t)-before-3000))
}

// TestDirectPathAfterRequesterError: a requester error moves the QP to ERR
// with an error completion and no event; the next WRITE, which the
// direct path would have run, is flushed, and State says ERR without a
// Query.
func TestDirectPathAfterRequesterError(t *testing.T) {
	a, b := directPair(t, "g", directAccess)
	good := vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
	if err := a.qp.PostSend([]vrdma.SendWR{good}); err != nil { // maps the region
		t.Fatal(err)
	}
	if wc := a.completion(t); wc.Status != ibv.WCSuccess {
		t.Fatalf("first write: %+v", wc)
	}
	bad := good
	bad.ID, bad.SGL = 2, []ibv.SGE{{Addr: a.mr.Addr(), Length: 64, LKey: a.mr.LKey() + 1}}
	if err := a.qp.PostSend([]vrdma.SendWR{bad}); err != nil {
		t.Fatal(err)
	}
	if wc := a.completion(t); wc.Status != ibv.WCLocProtErr {
		t.Fatalf("bad lkey: %+v (%v), want LOC_PROT_ERR", wc, wc.Status)
	}
	copy(a.mr.Bytes(), "must not land")
	before := append([]byte(nil), b.mr.Bytes()...)
	good.ID = 3
	if err := a.qp.PostSend([]vrdma.SendWR{good}); err != nil {
		t.Fatal(err)
	}
	if wc := a.completion(t); wc.Status != ibv.WCWRFlushErr || wc.ID != 3 {
		t.Fatalf("write after the QP went to ERR: %+v (%v), want WR_FLUSH_ERR", wc, wc.Status)
	}
	if !bytes.Equal(before, b.mr.Bytes()) {
		t.Fatal("a write posted in ERR changed the target region")
	}
	if st := a.qp.State(); st != ibv.QPSErr {
		t.Fatalf("State() is %v after a requester error, want ERR", st)
	}
}

// BenchmarkDirectRDMAWrite: one signaled 8-byte WRITE and its completion
// per operation, on the direct path. It allocates nothing.
func BenchmarkDirectRDMAWrite(b *testing.B) {
	x, y := directPair(b, "g", directAccess)
	wr := []vrdma.SendWR{{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{x.mr.SGE(0, 8)}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()}}
	wc := make([]vrdma.WorkCompletion, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := x.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := x.cq.Poll(wc)
			if err != nil || (n == 1 && wc[0].Status != ibv.WCSuccess) {
				b.Fatalf("%v %+v", err, wc[0])
			}
			if n == 1 {
				break
			}
		}
	}
}
