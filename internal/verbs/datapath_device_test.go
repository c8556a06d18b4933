package verbs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// region is a memfd registered with the device through the helper and
// mapped by the test too: what the device writes, the test reads.
type region struct {
	fd  int
	mem []byte
	mr  MR
}

func newRegion(t *testing.T, d *Device, size int) *region {
	t.Helper()
	fd, err := unix.MemfdCreate("vrdma-test-dp", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	// Registered at an iova unlike the helper's mapping, as the engine
	// registers at the application's address: the SGEs (handle and
	// offset) and the peers' remote addresses (IOVA) both use it.
	mr, err := d.RegMR(fd, 0, uint64(size), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic, testIOVA)
	if err != nil {
		t.Fatalf("RegMR: %v", err)
	}
	return &region{fd: fd, mem: mem, mr: mr}
}

// testIOVA is the address the device knows the test regions by.
const testIOVA = 0x1230000000000

// sge is n bytes at off of r.
func (r *region) sge(off uint64, n uint32) []SGE {
	return []SGE{{MR: r.mr.Handle, Offset: off, Length: n}}
}

// pollOne polls cq until one completion comes, failing the test after a
// generous deadline (a hang, not a performance bound).
func pollOne(t *testing.T, d *Device, cq CQ) WC {
	t.Helper()
	var wc [1]WC
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
		n, err := d.PollCQ(cq, wc[:])
		if err != nil {
			t.Fatalf("PollCQ: %v", err)
		}
		if n == 1 {
			return wc[0]
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no completion on CQ %d in 20 s", cq.Handle)
	return WC{}
}

// wantWC checks a completion's status, opcode (on success), wr_id and,
// unless byteLen is negative, its byte_len.
func wantWC(t *testing.T, what string, wc WC, status, opcode uint32, wrid uint64, byteLen int) {
	t.Helper()
	if wc.Status != status || wc.WRID != wrid || (status == WCSuccess && wc.Opcode != opcode) || (byteLen >= 0 && wc.ByteLen != uint32(byteLen)) {
		t.Errorf("%s: completion %+v, want status %d opcode %d wr_id %d byte_len %d", what, wc, status, opcode, wrid, byteLen)
	}
}

// hwCounter reads one of the port's hardware counters from sysfs.
func hwCounter(t *testing.T, dev, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", dev, "ports/1/hw_counters", name))
	if err != nil {
		t.Fatalf("the device's counter %s: %v", name, err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("counter %s: %v", name, err)
	}
	return v
}

// roceGID picks the GID to send from: a RoCE v2 entry holding an IPv4
// address (::ffff:a.b.c.d) if there is one, else any RoCE v2 entry.
func roceGID(p PortAttr) (GIDEntry, bool) {
	var any *GIDEntry
	for i, g := range p.GIDs {
		if g.Type != GIDTypeRoCEv2 {
			continue
		}
		if bytes.Equal(g.GID[:12], []byte{10: 0xff, 11: 0xff}) {
			return g, true
		}
		if any == nil {
			any = &p.GIDs[i]
		}
	}
	if any != nil {
		return *any, true
	}
	return GIDEntry{}, false
}

// connect moves a to RTS talking to b (RoCEv2: a GRH to gid).
func connect(t *testing.T, d *Device, a, b QP, gid GIDEntry, apsn, bpsn uint32) {
	t.Helper()
	steps := []QPAttr{
		{State: QPStateInit, Access: AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessLocalWrite},
		{State: QPStateRTR, PathMTU: 3, DestQPN: b.QPN, RQPSN: bpsn, DGID: gid.GID, SGIDIndex: uint8(gid.Index), HopLimit: 1,
			IsGlobal: true, MaxDestRdAtomic: 1, MinRNRTimer: 12},
		{State: QPStateRTS, SQPSN: apsn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
	}
	for _, s := range steps {
		if err := d.ModifyQP(a, s); err != nil {
			t.Fatalf("ModifyQP to state %d: %v", s.State, err)
		}
	}
}

// TestDataPathOnDevice drives a real device's data path through the
// helper: two RC QPs on the device connected to each other (rxe loops
// back), memfd regions registered through the helper and mapped by the
// test. An RDMA WRITE, a SEND/RECV, a WRITE_WITH_IMM, an RDMA READ, a
// fetch-and-add and a batch of SENDs move bytes the test then reads in the
// other region; their completions carry the right status, opcode, wr_id
// and byte_len; the device's packet counters rise by at least the payload's
// packets. A bad rkey completes with IBV_WC_REM_ACCESS_ERR, as rdma-core
// gives it, and work requests on QPs in error flush with
// IBV_WC_WR_FLUSH_ERR; the helper refuses SGEs outside their region, unknown opcodes
// and handles it does not have.
func TestDataPathOnDevice(t *testing.T) {
	d, dev := openTestDevice(t)
	gid := testGID(t, d)

	const size = 256 << 10
	ra, rb := newRegion(t, d, size), newRegion(t, d, size)
	cqa, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	cqb, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	qcap := QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	qa, err := d.CreateQP(cqa, cqa, qcap)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := d.CreateQP(cqb, cqb, qcap)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GID %d %x; QP a %+v, QP b %+v", gid.Index, gid.GID, qa, qb)
	connect(t, d, qa, qb, gid, 0x1234, 0x5678)
	connect(t, d, qb, qa, gid, 0x5678, 0x1234)
	if out, err := exec.Command("rdma", "resource", "show", "qp").CombinedOutput(); err == nil {
		for _, q := range []QP{qa, qb} {
			if !strings.Contains(string(out), fmt.Sprintf("lqpn %d ", q.QPN)) {
				t.Errorf("rdma resource show qp lacks QPN %d:\n%s", q.QPN, out)
			}
		}
	}
	sent0, rcvd0 := hwCounter(t, dev, "sent_pkts"), hwCounter(t, dev, "rcvd_pkts")

	// RDMA WRITE: 64 KiB of a into b.
	const wlen = 64 << 10
	for i := range ra.mem[:wlen] {
		ra.mem[i] = byte(i*7 + 1)
	}
	if err := d.PostSend(qa, []SendWR{{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: ra.sge(0, wlen), RemoteAddr: rb.mr.IOVA, RKey: rb.mr.RKey}}); err != nil {
		t.Fatalf("PostSend WRITE: %v", err)
	}
	wantWC(t, "WRITE", pollOne(t, d, cqa), WCSuccess, WCRDMAWrite, 1, -1)
	if !bytes.Equal(rb.mem[:wlen], ra.mem[:wlen]) {
		t.Errorf("after the RDMA WRITE, b's first bytes are %x, want %x", rb.mem[:16], ra.mem[:16])
	}

	// SEND/RECV: 3000 bytes into b at 128 KiB.
	const slen, soff = 3000, 128 << 10
	copy(ra.mem[soff:], bytes.Repeat([]byte("vrdma send "), slen/11+1)[:slen])
	if err := d.PostRecv(qb, []RecvWR{{WRID: 2, SGEs: rb.sge(soff, 4096)}}); err != nil {
		t.Fatalf("PostRecv: %v", err)
	}
	if err := d.PostSend(qa, []SendWR{{WRID: 3, Opcode: WRSend, Flags: SendSignaled, SGEs: ra.sge(soff, slen)}}); err != nil {
		t.Fatalf("PostSend SEND: %v", err)
	}
	wantWC(t, "SEND", pollOne(t, d, cqa), WCSuccess, WCSend, 3, -1)
	recv := pollOne(t, d, cqb)
	wantWC(t, "RECV", recv, WCSuccess, WCRecv, 2, slen)
	if recv.QPN != qb.QPN {
		t.Errorf("RECV completion on QPN %d, want %d", recv.QPN, qb.QPN)
	}
	if !bytes.Equal(rb.mem[soff:soff+slen], ra.mem[soff:soff+slen]) {
		t.Errorf("after SEND/RECV, b holds %q..., want %q...", rb.mem[soff:soff+16], ra.mem[soff:soff+16])
	}

	// WRITE_WITH_IMM: 512 bytes, and a receive consumed with the immediate.
	const ioff = 160 << 10
	copy(ra.mem[ioff:ioff+512], bytes.Repeat([]byte{0xab}, 512))
	if err := d.PostRecv(qb, []RecvWR{{WRID: 4}}); err != nil {
		t.Fatalf("PostRecv (no SGE): %v", err)
	}
	if err := d.PostSend(qa, []SendWR{{WRID: 5, Opcode: WRRDMAWriteWithImm, Flags: SendSignaled, Imm: 0x04030201,
		SGEs: ra.sge(ioff, 512), RemoteAddr: rb.mr.IOVA + ioff, RKey: rb.mr.RKey}}); err != nil {
		t.Fatalf("PostSend WRITE_WITH_IMM: %v", err)
	}
	wantWC(t, "WRITE_WITH_IMM", pollOne(t, d, cqa), WCSuccess, WCRDMAWrite, 5, -1)
	imm := pollOne(t, d, cqb)
	wantWC(t, "RECV_RDMA_WITH_IMM", imm, WCSuccess, WCRecvRDMAWithImm, 4, 512)
	if imm.Imm != 0x04030201 || imm.Flags&WCFlagWithImm == 0 {
		t.Errorf("immediate %#x flags %#x, want 0x04030201 with IBV_WC_WITH_IMM", imm.Imm, imm.Flags)
	}
	if !bytes.Equal(rb.mem[ioff:ioff+512], ra.mem[ioff:ioff+512]) {
		t.Errorf("after WRITE_WITH_IMM, b holds %x...", rb.mem[ioff:ioff+16])
	}

	// RDMA READ: b's first 4 KiB (the WRITE's bytes) back into a at 192 KiB.
	const roff = 192 << 10
	if err := d.PostSend(qa, []SendWR{{WRID: 6, Opcode: WRRDMARead, Flags: SendSignaled, SGEs: ra.sge(roff, 4096), RemoteAddr: rb.mr.IOVA, RKey: rb.mr.RKey}}); err != nil {
		t.Fatalf("PostSend READ: %v", err)
	}
	wantWC(t, "READ", pollOne(t, d, cqa), WCSuccess, WCRDMARead, 6, 4096)
	if !bytes.Equal(ra.mem[roff:roff+4096], rb.mem[:4096]) {
		t.Errorf("after the RDMA READ, a holds %x..., want %x...", ra.mem[roff:roff+16], rb.mem[:16])
	}

	// Fetch-and-add, where the device has atomics.
	if d.Attr.AtomicCap != 0 {
		const aoff = 224 << 10
		ne.PutUint64(rb.mem[aoff:], 5)
		if err := d.PostSend(qa, []SendWR{{WRID: 7, Opcode: WRAtomicFetchAdd, Flags: SendSignaled, SGEs: ra.sge(aoff, 8),
			RemoteAddr: rb.mr.IOVA + aoff, RKey: rb.mr.RKey, CompareAdd: 7}}); err != nil {
			t.Fatalf("PostSend FETCH_ADD: %v", err)
		}
		wantWC(t, "FETCH_ADD", pollOne(t, d, cqa), WCSuccess, WCFetchAdd, 7, 8)
		if got, old := ne.Uint64(rb.mem[aoff:]), ne.Uint64(ra.mem[aoff:]); got != 12 || old != 5 {
			t.Errorf("fetch-and-add 7 to 5: remote %d (want 12), fetched %d (want 5)", got, old)
		}
	}

	// A batch: four receives in one post, four SENDs in one post.
	recvs, sends := make([]RecvWR, 4), make([]SendWR, 4)
	for i := range recvs {
		recvs[i] = RecvWR{WRID: uint64(100 + i), SGEs: rb.sge(uint64(soff+i*1024), 1024)}
		sends[i] = SendWR{WRID: uint64(200 + i), Opcode: WRSend, Flags: SendSignaled, SGEs: ra.sge(uint64(i*100), uint32(100+i))}
	}
	if err := d.PostRecv(qb, recvs); err != nil {
		t.Fatalf("PostRecv batch: %v", err)
	}
	if err := d.PostSend(qa, sends); err != nil {
		t.Fatalf("PostSend batch: %v", err)
	}
	for i := range sends {
		wantWC(t, fmt.Sprintf("batch SEND %d", i), pollOne(t, d, cqa), WCSuccess, WCSend, uint64(200+i), -1)
		wantWC(t, fmt.Sprintf("batch RECV %d", i), pollOne(t, d, cqb), WCSuccess, WCRecv, uint64(100+i), 100+i)
		if !bytes.Equal(rb.mem[soff+i*1024:soff+i*1024+100+i], ra.mem[i*100:i*100+100+i]) {
			t.Errorf("batch SEND %d: the bytes differ", i)
		}
	}

	// The device moved the bytes: its own counters rose by at least the
	// payload's packets at a 1024-byte MTU (WRITE 64, SEND 3, ...).
	sent, rcvd := hwCounter(t, dev, "sent_pkts")-sent0, hwCounter(t, dev, "rcvd_pkts")-rcvd0
	const payloadPkts = wlen/1024 + 3 + 1 + 4 + 4
	t.Logf("%s counters: sent_pkts +%d, rcvd_pkts +%d (payload %d packets)", dev, sent, rcvd, payloadPkts)
	if sent < payloadPkts || rcvd < payloadPkts {
		t.Errorf("%s sent_pkts +%d, rcvd_pkts +%d: want each at least the payload's %d packets", dev, sent, rcvd, payloadPkts)
	}
	if out, err := exec.Command("rdma", "statistic", "show", "link", dev+"/1").CombinedOutput(); err == nil {
		t.Logf("rdma statistic show link %s/1:\n%s", dev, out)
	}

	// The relay's costs here, for docs/design/verbs-uplink-datapath.md (logged,
	// not asserted): an empty poll, and a signaled 8-byte WRITE posted and
	// polled to its completion.
	var wc [MaxPoll]WC
	start := time.Now()
	const polls, writes = 200, 50
	for i := 0; i < polls; i++ {
		if _, err := d.PollCQ(cqa, wc[:]); err != nil {
			t.Fatal(err)
		}
	}
	emptyPoll := time.Since(start) / polls
	start, empty := time.Now(), 0
	for i := 0; i < writes; i++ {
		if err := d.PostSend(qa, []SendWR{{WRID: 10, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: ra.sge(0, 8), RemoteAddr: rb.mr.IOVA, RKey: rb.mr.RKey}}); err != nil {
			t.Fatal(err)
		}
		for {
			n, err := d.PollCQ(cqa, wc[:1])
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				break
			}
			empty++
		}
	}
	t.Logf("relay: empty PollCQ %v; 8-byte WRITE post+poll to completion %v (%.1f empty polls each)", emptyPoll, time.Since(start)/writes, float64(empty)/writes)

	// The helper refuses what it cannot post, and posts nothing of the batch.
	for _, bad := range []struct {
		name string
		wr   SendWR
	}{
		{"SGE past its region", SendWR{Opcode: WRSend, SGEs: ra.sge(size-8, 16)}},
		{"no such region", SendWR{Opcode: WRSend, SGEs: []SGE{{MR: 4000, Length: 1}}}},
		{"unknown opcode", SendWR{Opcode: 9}},
		{"unknown flag", SendWR{Opcode: WRSend, Flags: 1 << 10}},
	} {
		if err := d.PostSend(qa, []SendWR{{WRID: 8, Opcode: WRSend, Flags: SendSignaled, SGEs: ra.sge(0, 8)}, bad.wr}); !errors.Is(err, ErrDevice) {
			t.Errorf("%s: PostSend = %v, want ErrDevice", bad.name, err)
		}
	}
	if err := d.PostSend(QP{Handle: 999}, []SendWR{{Opcode: WRSend}}); !errors.Is(err, ErrDevice) {
		t.Errorf("PostSend to no QP = %v, want ErrDevice", err)
	}
	if _, err := d.CreateQP(cqa, cqa, QPCap{MaxSendWR: 1, MaxSendSGE: MaxWRSGE + 1}); !errors.Is(err, ErrDevice) {
		t.Errorf("CreateQP with %d SGEs = %v, want ErrDevice", MaxWRSGE+1, err)
	}
	if _, err := d.CreateQP(cqa, cqa, QPCap{MaxSendWR: 1 << 30, MaxRecvWR: 1}); !errors.Is(err, ErrDevice) {
		t.Errorf("CreateQP with 2^30 work requests = %v, want rdma-core's refusal (ErrDevice)", err)
	}
	var none [4]WC
	if n, err := d.PollCQ(cqa, none[:]); err != nil || n != 0 {
		t.Errorf("after the refused batches, PollCQ = %d, %v; want nothing posted", n, err)
	}

	// A bad rkey: the responder refuses the WRITE and the requester
	// completes it with IBV_WC_REM_ACCESS_ERR.
	if err := d.PostSend(qa, []SendWR{{WRID: 9, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: ra.sge(0, 64), RemoteAddr: rb.mr.IOVA, RKey: rb.mr.RKey ^ 0x5a5a00}}); err != nil {
		t.Fatalf("PostSend WRITE with a bad rkey: %v", err)
	}
	wantWC(t, "WRITE with a bad rkey", pollOne(t, d, cqa), WCRemAccessErr, 0, 9, -1)

	// After the error, as rdma-core gives it: a SEND posted on a (in error
	// now) and a receive posted on b before b is moved to ERR complete with
	// IBV_WC_WR_FLUSH_ERR.
	if err := d.PostRecv(qb, []RecvWR{{WRID: 11, SGEs: rb.sge(0, 64)}}); err != nil {
		t.Fatalf("PostRecv on b: %v", err)
	}
	if err := d.ModifyQP(qb, QPAttr{State: QPStateErr}); err != nil {
		t.Fatalf("ModifyQP b to ERR: %v", err)
	}
	if err := d.PostSend(qa, []SendWR{{WRID: 12, Opcode: WRSend, Flags: SendSignaled, SGEs: ra.sge(0, 8)}}); err != nil {
		t.Fatalf("PostSend on a after its error: %v", err)
	}
	wantWC(t, "SEND on a QP in error", pollOne(t, d, cqa), WCWRFlushErr, 0, 12, -1)
	wantWC(t, "receive on a QP moved to ERR", pollOne(t, d, cqb), WCWRFlushErr, 0, 11, -1)

	// Tear down: a CQ in use is EBUSY, then everything goes.
	if err := d.DestroyCQ(cqa); !errors.Is(err, ErrDevice) {
		t.Errorf("DestroyCQ of a CQ a QP uses = %v, want ErrDevice (EBUSY)", err)
	}
	for _, q := range []QP{qa, qb} {
		if err := d.DestroyQP(q); err != nil {
			t.Errorf("DestroyQP: %v", err)
		}
	}
	if err := d.DestroyQP(qa); !errors.Is(err, ErrDevice) {
		t.Errorf("DestroyQP twice = %v, want ErrDevice", err)
	}
	for _, c := range []CQ{cqa, cqb} {
		if err := d.DestroyCQ(c); err != nil {
			t.Errorf("DestroyCQ: %v", err)
		}
	}
	for _, r := range []*region{ra, rb} {
		if err := d.DeregMR(r.mr); err != nil {
			t.Errorf("DeregMR: %v", err)
		}
	}
}

// pushed is a completion the helper pushed, with its CQ.
type pushed struct {
	cq uint32
	wc WC
}

// TestPushedCompletionsOnDevice: CQs made with push get their completions
// from the helper as the device reports them (its completion channel), with
// no PollCQ: a SEND/RECV and an RDMA WRITE between two looped-back QPs
// arrive at the handler with the right CQ, status, opcode and byte_len, and
// nothing is left to poll. It logs the push's cost against the poll's.
func TestPushedCompletionsOnDevice(t *testing.T) {
	d, _ := openTestDevice(t)
	gid := testGID(t, d)
	got := make(chan pushed, 2*MaxPoll)
	d.SetCompletionHandler(func(cq uint32, wcs []WC) {
		for _, w := range wcs {
			got <- pushed{cq, w}
		}
	})
	next := func(what string) pushed {
		t.Helper()
		select {
		case p := <-got:
			return p
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no completion pushed in 20 s", what)
		}
		return pushed{}
	}

	ra, rb := newRegion(t, d, 64<<10), newRegion(t, d, 64<<10)
	cqa, err := d.CreateCQ(64, true)
	if err != nil {
		t.Fatal(err)
	}
	cqb, err := d.CreateCQ(64, true)
	if err != nil {
		t.Fatal(err)
	}
	qcap := QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	qa, err := d.CreateQP(cqa, cqa, qcap)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := d.CreateQP(cqb, cqb, qcap)
	if err != nil {
		t.Fatal(err)
	}
	connect(t, d, qa, qb, gid, 0x100, 0x200)
	connect(t, d, qb, qa, gid, 0x200, 0x100)

	copy(ra.mem, "pushed completions")
	if err := d.PostRecv(qb, []RecvWR{{WRID: 1, SGEs: rb.sge(0, 4096)}}); err != nil {
		t.Fatal(err)
	}
	if err := d.PostSend(qa, []SendWR{{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGEs: ra.sge(0, 18)}}); err != nil {
		t.Fatal(err)
	}
	for seen := 0; seen < 2; seen++ {
		p := next("SEND/RECV")
		switch p.cq {
		case cqa.Handle:
			wantWC(t, "pushed SEND", p.wc, WCSuccess, WCSend, 2, -1)
		case cqb.Handle:
			wantWC(t, "pushed RECV", p.wc, WCSuccess, WCRecv, 1, 18)
		default:
			t.Errorf("a completion pushed for CQ %d, not %d or %d: %+v", p.cq, cqa.Handle, cqb.Handle, p.wc)
		}
	}
	if string(rb.mem[:18]) != "pushed completions" {
		t.Errorf("after the pushed SEND/RECV, b holds %q", rb.mem[:18])
	}
	if err := d.PostSend(qa, []SendWR{{WRID: 3, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: ra.sge(0, 4096), RemoteAddr: rb.mr.IOVA + 8192, RKey: rb.mr.RKey}}); err != nil {
		t.Fatal(err)
	}
	if p := next("WRITE"); p.cq != cqa.Handle {
		t.Errorf("the WRITE's completion pushed for CQ %d, want %d", p.cq, cqa.Handle)
	} else {
		wantWC(t, "pushed WRITE", p.wc, WCSuccess, WCRDMAWrite, 3, -1)
	}
	var wcs [4]WC
	if n, err := d.PollCQ(cqa, wcs[:]); err != nil || n != 0 {
		t.Errorf("PollCQ of a pushing CQ after its pushes = %d, %v; want nothing left", n, err)
	}

	// The push's cost: 8-byte WRITEs posted and their completions pushed.
	const writes = 50
	start := time.Now()
	for i := 0; i < writes; i++ {
		if err := d.PostSend(qa, []SendWR{{WRID: 4, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: ra.sge(0, 8), RemoteAddr: rb.mr.IOVA, RKey: rb.mr.RKey}}); err != nil {
			t.Fatal(err)
		}
		next("8-byte WRITE")
	}
	t.Logf("relay: 8-byte WRITE post to pushed completion %v", time.Since(start)/writes)
	for _, q := range []QP{qa, qb} {
		if err := d.DestroyQP(q); err != nil {
			t.Errorf("DestroyQP: %v", err)
		}
	}
	for _, c := range []CQ{cqa, cqb} {
		if err := d.DestroyCQ(c); err != nil {
			t.Errorf("DestroyCQ: %v", err)
		}
	}
}

// openTestDevice opens the device the interop guest names (testHelperEnv,
// testDevEnv) through a helper of its own, skipping the test where none is
// named, and returns it with its name; it is closed when the test ends.
func openTestDevice(t *testing.T) (*Device, string) {
	t.Helper()
	helper, dev := os.Getenv(testHelperEnv), os.Getenv(testDevEnv)
	if helper == "" || dev == "" {
		t.Skipf("needs an RDMA device: set %s and %s (the interop test runs it in a guest with rdma_rxe)", testHelperEnv, testDevEnv)
	}
	h, err := StartHelper(helper)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDevice(h, dev, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, dev
}

// testGID returns the RoCE v2 GID of d's port, failing the test where the
// port has none.
func testGID(t *testing.T, d *Device) GIDEntry {
	t.Helper()
	port, err := d.QueryPort()
	if err != nil {
		t.Fatal(err)
	}
	gid, ok := roceGID(port)
	if !ok {
		t.Fatalf("%s has no RoCE v2 GID: %+v", os.Getenv(testDevEnv), port.GIDs)
	}
	return gid
}
