package engine

import (
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
)

// postNext posts w as x's next send request and returns its completion
// (the send CQ's newest entry once it has one more).
func postNext(t *testing.T, x *QP, w *abi.SendWQE, sgl []abi.SGE) abi.CQE {
	t.Helper()
	sq := x.SQ()
	i := shm.Load32(x.mem, abi.RingProdOff)
	cq := x.SendCQ()
	had := shm.Load32(cq.mem, cq.ring.Offset+abi.RingProdOff)
	off := sq.Entry(i)
	if err := abi.PutSendWQE(x.mem[off:off+sq.Stride], w, sgl, nil); err != nil {
		t.Fatal(err)
	}
	shm.Store32(x.mem, abi.RingProdOff, i+1)
	x.kickWorker()
	deadline := time.Now().Add(20 * time.Second) // hang guard
	for shm.Load32(cq.mem, cq.ring.Offset+abi.RingProdOff) == had {
		if time.Now().After(deadline) {
			t.Fatal("no completion")
		}
		time.Sleep(time.Millisecond)
	}
	var c abi.CQE
	abi.ParseCQE(cq.mem[cq.ring.Entry(had):], &c)
	return c
}

// mwStep is one request of a memory-window scenario: a bind, an
// invalidation, a deallocation or an RDMA WRITE / READ through an rkey.
type mwStep struct {
	op     string // "bind" (by the responder; "bind-x" by the requester), "inv", "dealloc", "write", "read", "write-lkey"
	key    string // "mw", "mw-old" (the rkey before the last bind), "mr"
	region string // bind: "mr" (MW_BIND) or "plain" (without)
	at     uint64 // bind: offset in the region; write/read: offset in it
	length uint64 // bind: length; write/read: bytes
	access abi.Access
	want   abi.Status
}

// TestMemoryWindows runs rxe's memory-window semantics on a connected pair
// of one adapter: a window's rkey grants its bound range and access only,
// each bind changes its rkey's low 8 bits (the old rkey grants nothing),
// a bind needs a region with MW_BIND access and a range inside it, a type
// 2 window is invalidated locally (type 1 cannot be), and an invalidated
// or deallocated window's rkey is a remote access error. A window's rkey
// is no lkey.
func TestMemoryWindows(t *testing.T) {
	const rw = abi.AccessRemoteWrite | abi.AccessRemoteRead
	tests := []struct {
		name  string
		typ   uint8
		steps []mwStep
	}{
		{"write inside the window", 1, []mwStep{
			{op: "bind", region: "mr", at: 256, length: 512, access: rw},
			{op: "write", key: "mw", at: 256, length: 512},
			{op: "read", key: "mw", at: 300, length: 16},
		}},
		{"write past the window", 1, []mwStep{
			{op: "bind", region: "mr", at: 256, length: 512, access: rw},
			{op: "write", key: "mw", at: 700, length: 100, want: abi.StatusRemAccessErr},
		}},
		{"write before the window", 1, []mwStep{
			{op: "bind", region: "mr", at: 256, length: 512, access: rw},
			{op: "write", key: "mw", at: 255, length: 2, want: abi.StatusRemAccessErr},
		}},
		{"write through a read-only window", 1, []mwStep{
			{op: "bind", region: "mr", at: 0, length: 512, access: abi.AccessRemoteRead},
			{op: "read", key: "mw", at: 0, length: 8},
			{op: "write", key: "mw", at: 0, length: 8, want: abi.StatusRemAccessErr},
		}},
		{"unbound window", 1, []mwStep{
			{op: "write", key: "mw", at: 0, length: 8, want: abi.StatusRemAccessErr},
		}},
		{"rebind changes the key", 1, []mwStep{
			{op: "bind", region: "mr", at: 0, length: 512, access: rw},
			{op: "bind", region: "mr", at: 0, length: 512, access: rw},
			{op: "write", key: "mw", at: 0, length: 8},
			{op: "write", key: "mw-old", at: 0, length: 8, want: abi.StatusRemAccessErr},
		}},
		{"unbind with length 0", 1, []mwStep{
			{op: "bind", region: "mr", at: 0, length: 512, access: rw},
			{op: "bind", region: "mr", at: 0, length: 0},
			{op: "write", key: "mw", at: 0, length: 8, want: abi.StatusRemAccessErr},
		}},
		{"bind to a region without MW_BIND", 1, []mwStep{
			{op: "bind", region: "plain", at: 0, length: 512, access: rw, want: abi.StatusMWBindErr},
		}},
		{"bind past the region", 1, []mwStep{
			{op: "bind", region: "mr", at: 4000, length: 512, access: rw, want: abi.StatusMWBindErr},
		}},
		{"deallocated window", 1, []mwStep{
			{op: "bind", region: "mr", at: 0, length: 512, access: rw},
			{op: "dealloc"},
			{op: "write", key: "mw", at: 0, length: 8, want: abi.StatusRemAccessErr},
		}},
		{"type 1 is not invalidated", 1, []mwStep{
			{op: "bind", region: "mr", at: 0, length: 512, access: rw},
			{op: "inv", key: "mw", want: abi.StatusMWBindErr},
		}},
		{"type 2 invalidated locally", 2, []mwStep{
			{op: "bind", region: "mr", at: 0, length: 512, access: rw},
			{op: "write", key: "mw", at: 0, length: 8},
			{op: "inv", key: "mw"},
			{op: "write", key: "mw", at: 0, length: 8, want: abi.StatusRemAccessErr},
		}},
		{"type 2 grants only the binding QP's peer", 2, []mwStep{
			{op: "bind-x", region: "mr", at: 0, length: 512, access: rw},
			{op: "write", key: "mw", at: 0, length: 8, want: abi.StatusRemAccessErr},
		}},
		{"type 2 binds only when free", 2, []mwStep{
			{op: "bind", region: "mr", at: 0, length: 512, access: rw},
			{op: "bind", region: "mr", at: 0, length: 512, access: rw, want: abi.StatusMWBindErr},
		}},
		{"type 2 rebinds after invalidation", 2, []mwStep{
			{op: "bind", region: "mr", at: 0, length: 512, access: rw},
			{op: "inv", key: "mw"},
			{op: "bind", region: "mr", at: 512, length: 512, access: rw},
			{op: "write", key: "mw", at: 600, length: 8},
		}},
		{"a window's rkey is no lkey", 1, []mwStep{
			{op: "bind", region: "mr", at: 0, length: 512, access: rw | abi.AccessLocalWrite},
			{op: "write-lkey", key: "mw", at: 0, length: 8, want: abi.StatusLocProtErr},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// y, the responder, binds and invalidates: a type 2 window
			// grants access only to the peer of the QP that bound it.
			x, y := connectedPair(t)
			pd := x.PD()
			const size = 4096
			target, err := shm.NewRegion("target", size)
			if err != nil {
				t.Fatal(err)
			}
			base := shm.Addr(target.Bytes())
			mr, err := RegisterMR(pd, target, base, size, abi.AccessLocalWrite|rw|abi.AccessMWBind)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Deregister()
			pr, err := shm.NewRegion("plain", size)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := RegisterMR(pd, pr, shm.Addr(pr.Bytes()), size, abi.AccessLocalWrite|rw)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Deregister()
			src, err := shm.NewRegion("src", size)
			if err != nil {
				t.Fatal(err)
			}
			local, err := RegisterMR(pd, src, shm.Addr(src.Bytes()), size, abi.AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer local.Deregister()
			mw, err := AllocMW(pd, tt.typ)
			if err != nil {
				t.Fatal(err)
			}
			defer mw.Dealloc()
			key, old := mw.Key(), mw.Key()
			for i, s := range tt.steps {
				var c abi.CQE
				rkey := map[string]uint32{"mw": key, "mw-old": old, "mr": mr.Key()}[s.key]
				switch s.op {
				case "bind", "bind-x":
					r := map[string]*MR{"mr": mr, "plain": plain}[s.region]
					nk := key&^0xff | (key+1)&0xff
					w := abi.SendWQE{WRID: uint64(i), Opcode: abi.OpBindMW, Flags: abi.SendSignaled, Imm: key, RKey: nk,
						AH: r.Key(), RemoteAddr: r.addr + s.at, CompareAdd: s.length, Swap: uint64(s.access)}
					binder := y
					if s.op == "bind-x" {
						binder = x
					}
					c = postNext(t, binder, &w, nil)
					if c.Status == abi.StatusSuccess {
						old, key = key, nk
						if mw.Key() != nk || nk == old {
							t.Fatalf("step %d: the window's rkey is 0x%x after the bind, want 0x%x (was 0x%x)", i, mw.Key(), nk, old)
						}
					}
				case "inv":
					w := abi.SendWQE{WRID: uint64(i), Opcode: abi.OpLocalInv, Flags: abi.SendSignaled, Imm: rkey}
					c = postNext(t, y, &w, nil)
				case "dealloc":
					mw.Dealloc()
					continue
				case "write", "read", "write-lkey":
					op := abi.OpRDMAWrite
					if s.op == "read" {
						op = abi.OpRDMARead
					}
					for j := range src.Bytes()[:s.length] {
						src.Bytes()[j] = byte(i + j + 1)
					}
					w := abi.SendWQE{WRID: uint64(i), Opcode: op, Flags: abi.SendSignaled, RemoteAddr: base + s.at, RKey: rkey}
					sge := abi.SGE{Addr: shm.Addr(src.Bytes()), Length: uint32(s.length), LKey: local.Key()}
					if s.op == "write-lkey" {
						w.RKey = mr.Key()
						sge = abi.SGE{Addr: base, Length: uint32(s.length), LKey: rkey}
					}
					c = postNext(t, x, &w, []abi.SGE{sge})
					if s.op == "write" && c.Status == abi.StatusSuccess && target.Bytes()[s.at] != src.Bytes()[0] {
						t.Fatalf("step %d: the WRITE through the window did not land", i)
					}
				}
				if c.Status != s.want || c.WRID != uint64(i) {
					t.Fatalf("step %d (%s): completion %v, want status %v", i, s.op, c, s.want)
				}
				if s.op[:min(len(s.op), 4)] == "bind" && c.Opcode != abi.WCBindMW || s.op == "inv" && c.Opcode != abi.WCLocalInv {
					t.Fatalf("step %d (%s): completion opcode %v", i, s.op, c.Opcode)
				}
			}
		})
	}
}

// TestWindowLookupAllocates: resolving a window's rkey on the data path
// allocates nothing.
func TestWindowLookupAllocates(t *testing.T) {
	x, y := connectedPair(t)
	pd := x.PD()
	r, err := shm.NewRegion("t", 4096)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := RegisterMR(pd, r, shm.Addr(r.Bytes()), 4096, abi.AccessLocalWrite|abi.AccessRemoteWrite|abi.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Deregister()
	mw, err := AllocMW(pd, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Dealloc()
	w := abi.SendWQE{Opcode: abi.OpBindMW, Flags: abi.SendSignaled, Imm: mw.Key(), RKey: mw.Key() + 1, AH: mr.Key(),
		RemoteAddr: mr.addr, CompareAdd: 4096, Swap: uint64(abi.AccessRemoteWrite)}
	if c := postNext(t, x, &w, nil); c.Status != abi.StatusSuccess {
		t.Fatalf("bind: %v", c)
	}
	key := mw.Key()
	var s scratch
	if n := testing.AllocsPerRun(100, func() {
		if b := s.remote(y, key, mr.addr, 8, abi.AccessRemoteWrite); b == nil {
			t.Fatal("the window's rkey does not resolve")
		}
		s.releaseAll()
	}); n != 0 {
		t.Fatalf("%v allocations per lookup", n)
	}
}

// TestWindowInvalidateAllocates: invalidating a bound type 2 window (what
// a SEND with Invalidate from another host does on the data path)
// allocates nothing, and its rkey grants nothing afterwards.
func TestWindowInvalidateAllocates(t *testing.T) {
	_, y := connectedPair(t)
	pd := y.PD()
	r, err := shm.NewRegion("t", 4096)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := RegisterMR(pd, r, shm.Addr(r.Bytes()), 4096, abi.AccessLocalWrite|abi.AccessRemoteWrite|abi.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Deregister()
	mw, err := AllocMW(pd, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Dealloc()
	for round := 0; round < 3; round++ {
		nk := mw.Key()&^0xff | (mw.Key()+1)&0xff
		w := abi.SendWQE{Opcode: abi.OpBindMW, Flags: abi.SendSignaled, Imm: mw.Key(), RKey: nk, AH: mr.Key(),
			RemoteAddr: mr.addr, CompareAdd: 4096, Swap: uint64(abi.AccessRemoteWrite)}
		if c := postNext(t, y, &w, nil); c.Status != abi.StatusSuccess {
			t.Fatalf("bind: %v", c)
		}
		var s scratch
		if b := s.remote(y, nk, mr.addr, 8, abi.AccessRemoteWrite); b == nil {
			t.Fatal("the bound window's rkey does not resolve")
		}
		s.releaseAll()
		// AllocsPerRun calls f once to warm up, then counts the second call.
		calls, ok := 0, false
		if n := testing.AllocsPerRun(1, func() {
			if calls++; calls == 2 {
				ok = invalidate(y.adapter, pd, nk)
			}
		}); n != 0 || !ok {
			t.Fatalf("round %d: invalidation: %v allocations, invalidated %v", round, n, ok)
		}
		if b := s.remote(y, nk, mr.addr, 8, abi.AccessRemoteWrite); b != nil {
			t.Fatal("the invalidated window's rkey still resolves")
		}
		s.releaseAll()
	}
}

// TestWindowsStayInTheirPD: a QP binds only windows and regions of its own
// protection domain, and invalidates only its PD's windows.
func TestWindowsStayInTheirPD(t *testing.T) {
	_, y := connectedPair(t)
	pd, other := y.PD(), y.adapter.NewPD()
	reg := func(p *PD) *MR {
		r, err := shm.NewRegion("t", 4096)
		if err != nil {
			t.Fatal(err)
		}
		mr, err := RegisterMR(p, r, shm.Addr(r.Bytes()), 4096, abi.AccessLocalWrite|abi.AccessRemoteWrite|abi.AccessMWBind)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mr.Deregister)
		return mr
	}
	mine, theirs := reg(pd), reg(other)
	alloc := func(p *PD) *MW {
		w, err := AllocMW(p, MWType2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Dealloc)
		return w
	}
	tests := []struct {
		name string
		w    abi.SendWQE
	}{
		{"another PD's region", abi.SendWQE{Opcode: abi.OpBindMW, Imm: alloc(pd).Key(), AH: theirs.Key(), RemoteAddr: theirs.addr, CompareAdd: 64, Swap: uint64(abi.AccessRemoteWrite)}},
		{"another PD's window", abi.SendWQE{Opcode: abi.OpBindMW, Imm: alloc(other).Key(), AH: mine.Key(), RemoteAddr: mine.addr, CompareAdd: 64, Swap: uint64(abi.AccessRemoteWrite)}},
		{"a region's key as a window's", abi.SendWQE{Opcode: abi.OpBindMW, Imm: mine.Key(), AH: mine.Key(), RemoteAddr: mine.addr, CompareAdd: 64, Swap: uint64(abi.AccessRemoteWrite)}},
		{"invalidating another PD's window (unbound: no QP of this PD can bind it)", abi.SendWQE{Opcode: abi.OpLocalInv, Imm: alloc(other).Key()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if st := y.execute(&tt.w).status; st != abi.StatusMWBindErr {
				t.Fatalf("status %v, want MW_BIND_ERR", st)
			}
		})
	}
}
