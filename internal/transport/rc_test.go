package transport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
)

// workload posts every RC operation from a to b and returns a check that
// asserts each completed exactly once, in order, with the right bytes.
func workload(t *testing.T, w *world, a, b *node) func() {
	t.Helper()
	const (
		writeKey = 0x100
		readKey  = 0x200
		atomKey  = 0x300
	)
	wbuf := make([]byte, 4096)
	rsrc := pattern(3000, 0x5a)
	counter := make([]byte, 24) // FetchAdd, CmpSwap, ATOMIC WRITE
	b.regions[writeKey] = &region{buf: wbuf, va: 0x10000, access: abi.AccessRemoteWrite}
	b.regions[readKey] = &region{buf: rsrc, va: 0x20000, access: abi.AccessRemoteRead}
	b.regions[atomKey] = &region{buf: counter, va: 0x30000, access: abi.AccessRemoteAtomic | abi.AccessRemoteWrite}

	type want struct {
		id  uint64
		op  abi.Opcode
		buf []byte // READ: where the data lands, to compare with expect
		exp []byte
	}
	var posted []want
	var sends [][]byte
	post := func(wq WQE) {
		t.Helper()
		wq.ID = uint64(len(posted) + 1)
		wq.Signaled = true
		if err := a.qp.Post(a, &wq, w.now); err != nil {
			t.Fatalf("post %d: %v", wq.ID, err)
		}
		posted = append(posted, want{id: wq.ID, op: wq.Op})
	}
	recvBufs := make([][]byte, 0)
	for i := 0; i < 12; i++ {
		rb := make([]byte, 2048)
		recvBufs = append(recvBufs, rb)
		b.recvs = append(b.recvs, Recv{ID: uint64(1000 + i), Spans: [][]byte{rb[:100], rb[100:]}, Length: 2048})
	}
	var fadds [][]byte
	for i, size := range []int{0, 8, 255, 256, 257, 1024, 1500} {
		msg := pattern(size, byte(i))
		sends = append(sends, msg)
		op := abi.OpSend
		if i%2 == 1 {
			op = abi.OpSendImm
		}
		post(WQE{Op: op, Local: [][]byte{msg}, Length: uint32(size), Imm: uint32(i)})

		data := pattern(size, byte(0x40+i))
		post(WQE{Op: abi.OpRDMAWrite, Local: [][]byte{data[:size/2], data[size/2:]}, Length: uint32(size), RemoteAddr: 0x10000 + uint64(i*300), RKey: writeKey})
		copy(wbuf[i*300:], data) // what the region must hold in the end (writes do not overlap)
		_ = data

		rd := make([]byte, size)
		post(WQE{Op: abi.OpRDMARead, Local: [][]byte{rd}, Length: uint32(size), RemoteAddr: 0x20000 + uint64(i*100), RKey: readKey})
		posted[len(posted)-1].buf, posted[len(posted)-1].exp = rd, rsrc[i*100:i*100+size]

		res := make([]byte, 8)
		fadds = append(fadds, res)
		post(WQE{Op: abi.OpAtomicFetchAndAdd, Local: [][]byte{res}, Length: 8, RemoteAddr: 0x30000, RKey: atomKey, CompareAdd: 1, Fence: i == 3})

		// ATOMIC WRITE: a duplicate executed again after a later one
		// would leave an older value behind.
		post(WQE{Op: abi.OpAtomicWrite, RemoteAddr: 0x30010, RKey: atomKey, CompareAdd: 0x1122334455667700 + uint64(i)})
	}
	wantWrite := append([]byte(nil), wbuf...)
	for i := range wbuf {
		wbuf[i] = 0
	}
	// A WRITE with immediate consumes a receive too.
	imm := pattern(600, 0x77)
	post(WQE{Op: abi.OpRDMAWriteImm, Local: [][]byte{imm}, Length: 600, RemoteAddr: 0x10000 + 3000, RKey: writeKey, Imm: 0xabcdef})
	copy(wantWrite[3000:], imm)
	cas := make([]byte, 8)
	post(WQE{Op: abi.OpAtomicCmpAndSwp, Local: [][]byte{cas}, Length: 8, RemoteAddr: 0x30008, RKey: atomKey, CompareAdd: 0, Swap: 42, Fence: true})

	return func() {
		t.Helper()
		if a.failed != "" || b.failed != "" {
			t.Fatalf("a QP failed: A %q, B %q", a.failed, b.failed)
		}
		if len(a.sent) != len(posted) {
			t.Fatalf("%d send completions for %d requests", len(a.sent), len(posted))
		}
		for i, s := range a.sent {
			if s.id != posted[i].id || s.status != abi.StatusSuccess {
				t.Fatalf("completion %d: id %d status %v, want id %d success", i, s.id, s.status, posted[i].id)
			}
		}
		for _, p := range posted {
			if p.buf != nil && !bytes.Equal(p.buf, p.exp) {
				t.Fatalf("READ %d brought the wrong bytes", p.id)
			}
		}
		if !bytes.Equal(wbuf, wantWrite) {
			t.Fatal("the WRITE target does not hold what was written")
		}
		for i, f := range fadds {
			if got := binary.LittleEndian.Uint64(f); got != uint64(i) {
				t.Fatalf("FetchAdd %d returned %d, want %d (each executes once, in order)", i, got, i)
			}
		}
		if got := binary.LittleEndian.Uint64(counter); got != uint64(len(fadds)) {
			t.Fatalf("counter is %d after %d FetchAdds: an atomic ran twice or never", got, len(fadds))
		}
		if binary.LittleEndian.Uint64(counter[8:]) != 42 || binary.LittleEndian.Uint64(cas) != 0 {
			t.Fatal("CmpSwap did not swap once")
		}
		if got := binary.LittleEndian.Uint64(counter[16:]); got != 0x1122334455667706 {
			t.Fatalf("the ATOMIC WRITE target holds %#x, want the last one written, 0x1122334455667706", got)
		}
		if len(b.recvd) != len(sends)+1 {
			t.Fatalf("%d receive completions, want %d", len(b.recvd), len(sends)+1)
		}
		for i, msg := range sends {
			r := b.recvd[i]
			if r.c.Status != abi.StatusSuccess || r.c.Bytes != uint32(len(msg)) || r.id != uint64(1000+i) {
				t.Fatalf("receive %d: %+v", i, r)
			}
			if !bytes.Equal(recvBufs[i][:len(msg)], msg) {
				t.Fatalf("receive %d holds the wrong bytes", i)
			}
			if (i%2 == 1) != (r.c.Flags&abi.WCWithImm != 0) || i%2 == 1 && r.c.Imm != uint32(i) {
				t.Fatalf("receive %d: immediate %v %d", i, r.c.Flags, r.c.Imm)
			}
		}
		last := b.recvd[len(sends)]
		if last.c.Opcode != abi.WCRecvRDMAImm || last.c.Imm != 0xabcdef || last.c.Bytes != 600 {
			t.Fatalf("WRITE with immediate completed as %+v", last.c)
		}
	}
}

func TestRCEveryOperation(t *testing.T) {
	w, a, b := pair(t, abi.QPTypeRC, 1, nil)
	check := workload(t, w, a, b)
	w.run([]*node{a, b}, 1e12)
	check()
	if a.naks+b.naks != 0 || w.sent == 0 {
		t.Fatalf("a lossless run sent %d sequence NAKs", a.naks+b.naks)
	}
}

func TestRCUnderFaults(t *testing.T) {
	cases := []struct {
		name             string
		loss, dup, reord float64
	}{
		{"loss 1%", 0.01, 0, 0},
		{"loss 5%", 0.05, 0, 0},
		{"loss 20%", 0.20, 0, 0},
		{"duplication", 0, 0.1, 0},
		{"reordering", 0, 0, 0.2},
		{"everything", 0.05, 0.05, 0.1},
	}
	for _, c := range cases {
		for seed := int64(1); seed <= 20; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", c.name, seed), func(t *testing.T) {
				w, a, b := pair(t, abi.QPTypeRC, seed, nil)
				w.loss, w.dup, w.reorder = c.loss, c.dup, c.reord
				check := workload(t, w, a, b)
				w.run([]*node{a, b}, 1e13)
				check()
			})
		}
	}
}

func TestRCSequenceNAKOncePerGap(t *testing.T) {
	w, a, b := pair(t, abi.QPTypeRC, 1, nil)
	b.regions[1] = &region{buf: make([]byte, 4096), va: 0, access: abi.AccessRemoteWrite}
	// Lose only the first packet of a 10-packet WRITE.
	lost := false
	data := pattern(2560, 1)
	w.loss = 0
	orig := w.rng
	_ = orig
	if err := a.qp.Post(a, &WQE{ID: 1, Op: abi.OpRDMAWrite, Local: [][]byte{data}, Length: 2560, RKey: 1}, 0); err != nil {
		t.Fatal(err)
	}
	if len(w.queue) != 10 {
		t.Fatalf("a 2560-byte WRITE at MTU 256 went out as %d packets, want 10", len(w.queue))
	}
	w.queue = w.queue[1:]
	lost = true
	w.run([]*node{a, b}, 1e12)
	if !lost || b.naks != 1 {
		t.Fatalf("the responder sent %d sequence NAKs for one gap, want 1", b.naks)
	}
	if len(a.sent) != 1 || a.sent[0].status != abi.StatusSuccess || !bytes.Equal(b.regions[1].buf[:2560], data) {
		t.Fatalf("the WRITE did not complete once after go-back-N: %+v", a.sent)
	}
	if a.retries != [4]int{RetryNAK: 1} || a.resent != 10 {
		t.Fatalf("the requester counted retries %v and %d packets sent again; want one NAK retry of all 10", a.retries, a.resent)
	}
}

func TestRCPeerGoneRetryExceeded(t *testing.T) {
	for _, retry := range []uint8{0, 1, 6} {
		t.Run(fmt.Sprint("retry_cnt ", retry), func(t *testing.T) {
			w, a, b := pair(t, abi.QPTypeRC, 1, func(c *Config) { c.RetryCnt = retry; c.Timeout = 10 })
			w.down = true
			msg := pattern(100, 1)
			for i := 0; i < 3; i++ {
				if err := a.qp.Post(a, &WQE{ID: uint64(i + 1), Op: abi.OpSend, Local: [][]byte{msg}, Length: 100}, 0); err != nil {
					t.Fatal(err)
				}
			}
			w.run([]*node{a, b}, 1e13)
			if len(a.sent) != 1 || a.sent[0].status != abi.StatusRetryExcErr {
				t.Fatalf("completions %+v, want one RETRY_EXC_ERR", a.sent)
			}
			// The first attempt and retry_cnt retries, each waiting the timeout.
			want := int64(retry+1) * abi.AckTimeout(10)
			if w.now != want {
				t.Fatalf("RETRY_EXC_ERR at %d ns, want %d (%d timeouts)", w.now, want, retry+1)
			}
			if a.retries != [4]int{RetryTimeout: int(retry)} || a.resent != 3*int(retry) {
				t.Fatalf("the requester counted retries %v and %d packets sent again; want %d timeouts, each resending the 3 SENDs", a.retries, a.resent, retry)
			}
			if a.event != NoEvent || a.failed == "" {
				t.Fatalf("the requester's QP must fail without an affiliated event: %v %q", a.event, a.failed)
			}
			a.qp.Flush(a)
			if len(a.sent) != 3 || a.sent[1].status != abi.StatusWRFlushErr || a.sent[2].status != abi.StatusWRFlushErr {
				t.Fatalf("flush: %+v", a.sent)
			}
		})
	}
}

func TestRCRNR(t *testing.T) {
	t.Run("receive posted late", func(t *testing.T) {
		w, a, b := pair(t, abi.QPTypeRC, 1, func(c *Config) { c.RNRRetry = 3; c.MinRNRTimer = 14 })
		msg := pattern(600, 3)
		if err := a.qp.Post(a, &WQE{ID: 1, Op: abi.OpSend, Local: [][]byte{msg}, Length: 600}, 0); err != nil {
			t.Fatal(err)
		}
		w.run([]*node{a, b}, abi.RNRTimer(14)+1) // first attempt and one RNR wait
		rb := make([]byte, 1000)
		b.recvs = append(b.recvs, Recv{ID: 9, Spans: [][]byte{rb}, Length: 1000})
		w.run([]*node{a, b}, 1e13)
		if len(a.sent) != 1 || a.sent[0].status != abi.StatusSuccess || !bytes.Equal(rb[:600], msg) {
			t.Fatalf("send completions %+v", a.sent)
		}
		if b.rnrs < 1 {
			t.Fatal("no RNR NAK was sent")
		}
		if a.retries[RetryRNR] != a.rnrIn || a.resent != 3*a.rnrIn {
			t.Fatalf("the requester counted %v retries and %d packets sent again after %d RNR NAKs; want one RNR retry of the 3-packet SEND each", a.retries, a.resent, a.rnrIn)
		}
	})
	t.Run("rnr_retry exceeded", func(t *testing.T) {
		w, a, b := pair(t, abi.QPTypeRC, 1, func(c *Config) { c.RNRRetry = 2; c.MinRNRTimer = 1 })
		if err := a.qp.Post(a, &WQE{ID: 1, Op: abi.OpSend, Local: [][]byte{pattern(10, 1)}, Length: 10}, 0); err != nil {
			t.Fatal(err)
		}
		w.run([]*node{a, b}, 1e13)
		if len(a.sent) != 1 || a.sent[0].status != abi.StatusRNRRetryExcErr {
			t.Fatalf("completions %+v, want RNR_RETRY_EXC_ERR", a.sent)
		}
		if b.rnrs != 3 {
			t.Fatalf("%d RNR NAKs, want 3 (the first attempt and 2 retries)", b.rnrs)
		}
	})
}

func TestRCResponderErrors(t *testing.T) {
	cases := []struct {
		name   string
		wqe    WQE
		access abi.Access
		status abi.Status
		event  abi.EventType
	}{
		{"bad rkey", WQE{Op: abi.OpRDMAWrite, Length: 8, RKey: 0x999}, abi.AccessRemoteWrite, abi.StatusRemAccessErr, abi.EventQPAccessErr},
		{"out of range", WQE{Op: abi.OpRDMARead, Length: 64, RKey: 1, RemoteAddr: 4090}, abi.AccessRemoteRead, abi.StatusRemAccessErr, abi.EventQPAccessErr},
		{"region lacks access", WQE{Op: abi.OpRDMARead, Length: 8, RKey: 1}, abi.AccessRemoteWrite, abi.StatusRemAccessErr, abi.EventQPAccessErr},
		{"QP forbids WRITE", WQE{Op: abi.OpRDMAWrite, Length: 8, RKey: 1}, 0, abi.StatusRemInvReqErr, abi.EventQPReqErr},
		{"misaligned atomic", WQE{Op: abi.OpAtomicFetchAndAdd, Length: 8, RKey: 1, RemoteAddr: 4}, abi.AccessRemoteAtomic, abi.StatusRemInvReqErr, abi.EventQPReqErr},
		{"SEND too long", WQE{Op: abi.OpSend, Length: 64}, 0, abi.StatusRemInvReqErr, abi.EventQPReqErr},
		{"misaligned ATOMIC WRITE", WQE{Op: abi.OpAtomicWrite, RKey: 1, RemoteAddr: 4}, abi.AccessRemoteWrite, abi.StatusRemInvReqErr, abi.EventQPReqErr},
		{"ATOMIC WRITE to a region without REMOTE_WRITE", WQE{Op: abi.OpAtomicWrite, RKey: 1, RemoteAddr: 8}, abi.AccessRemoteAtomic, abi.StatusRemAccessErr, abi.EventQPAccessErr},
		{"ATOMIC WRITE past the region", WQE{Op: abi.OpAtomicWrite, RKey: 1, RemoteAddr: 4096}, abi.AccessRemoteWrite, abi.StatusRemAccessErr, abi.EventQPAccessErr},
		{"ATOMIC WRITE with a bad rkey", WQE{Op: abi.OpAtomicWrite, RKey: 0x999, RemoteAddr: 8}, abi.AccessRemoteWrite, abi.StatusRemAccessErr, abi.EventQPAccessErr},
		{"QP forbids ATOMIC WRITE", WQE{Op: abi.OpAtomicWrite, RKey: 1, RemoteAddr: 8}, abi.AccessRemoteWrite, abi.StatusRemInvReqErr, abi.EventQPReqErr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, a, b := pair(t, abi.QPTypeRC, 1, func(cf *Config) {
				if c.name == "QP forbids WRITE" || c.name == "QP forbids ATOMIC WRITE" {
					cf.Access = abi.AccessRemoteRead
				}
			})
			b.regions[1] = &region{buf: make([]byte, 4096), va: 0, access: c.access}
			b.recvs = []Recv{{ID: 5, Spans: [][]byte{make([]byte, 16)}, Length: 16}}
			c.wqe.ID = 1
			c.wqe.Local = [][]byte{make([]byte, c.wqe.Length)}
			if err := a.qp.Post(a, &c.wqe, 0); err != nil {
				t.Fatal(err)
			}
			w.run([]*node{a, b}, 1e13)
			if len(a.sent) != 1 || a.sent[0].status != c.status {
				t.Fatalf("requester completions %+v, want %v", a.sent, c.status)
			}
			if b.failed == "" || b.event != c.event {
				t.Fatalf("responder: failed %q event %v, want event %v", b.failed, b.event, c.event)
			}
		})
	}
}

// The requester never has more than 128 PSNs unacknowledged.
func TestRCWindow(t *testing.T) {
	w, a, b := pair(t, abi.QPTypeRC, 1, nil)
	b.regions[1] = &region{buf: make([]byte, 1<<16), access: abi.AccessRemoteWrite}
	data := pattern(1<<16, 9)
	if err := a.qp.Post(a, &WQE{ID: 1, Op: abi.OpRDMAWrite, Local: [][]byte{data}, Length: 1 << 16, RKey: 1}, 0); err != nil {
		t.Fatal(err)
	}
	if len(w.queue) != maxUnackedPSNs {
		t.Fatalf("%d packets in flight before any ACK, want the window of %d", len(w.queue), maxUnackedPSNs)
	}
	w.run([]*node{a, b}, 1e13)
	if len(a.sent) != 1 || a.sent[0].status != abi.StatusSuccess || !bytes.Equal(b.regions[1].buf, data) {
		t.Fatalf("a 256-packet WRITE did not complete: %+v", a.sent)
	}
}
