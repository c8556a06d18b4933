package verbs

import (
	"bytes"
	"testing"
)

// TestInlineOnDevice: inline work requests through the helper on a real
// device. A QP asks for 64 inline bytes and gets at least that; an inline
// SEND of 48 bytes and an inline RDMA WRITE of 60, taken from the message
// (no region: the test's bytes are nowhere the device could read them
// otherwise), land byte for byte in the peer's region; a batch of eight
// inline SENDs in one post completes, each in its own receive.
func TestInlineOnDevice(t *testing.T) {
	d, _ := openTestDevice(t)
	gid := testGID(t, d)
	rb := newRegion(t, d, 64<<10)
	cqa, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	cqb, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	qcap := QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 64}
	qa, err := d.CreateQP(cqa, cqa, qcap)
	if err != nil {
		t.Fatalf("a QP with 64 inline bytes: %v", err)
	}
	qb, err := d.CreateQP(cqb, cqb, qcap)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the device granted %+v for %+v", qa.Cap, qcap)
	connect(t, d, qa, qb, gid, 0x100, 0x200)
	connect(t, d, qb, qa, gid, 0x200, 0x100)

	msg := bytes.Repeat([]byte("inline! "), 6) // 48 bytes
	if err := d.PostRecv(qb, []RecvWR{{WRID: 1, SGEs: rb.sge(0, 4096)}}); err != nil {
		t.Fatal(err)
	}
	if err := d.PostSend(qa, []SendWR{{WRID: 2, Opcode: WRSend, Flags: SendSignaled | SendInline, Inline: msg}}); err != nil {
		t.Fatalf("an inline SEND: %v", err)
	}
	wantWC(t, "inline SEND", pollOne(t, d, cqa), WCSuccess, WCSend, 2, -1)
	wantWC(t, "its RECV", pollOne(t, d, cqb), WCSuccess, WCRecv, 1, len(msg))
	if !bytes.Equal(rb.mem[:len(msg)], msg) {
		t.Errorf("the inline SEND delivered %q, want %q", rb.mem[:len(msg)], msg)
	}

	wr := bytes.Repeat([]byte{0x5a, 0xa5, 0x3c}, 20) // 60 bytes
	if err := d.PostSend(qa, []SendWR{{WRID: 3, Opcode: WRRDMAWrite, Flags: SendSignaled | SendInline, Inline: wr,
		RemoteAddr: rb.mr.IOVA + 8192, RKey: rb.mr.RKey}}); err != nil {
		t.Fatalf("an inline WRITE: %v", err)
	}
	wantWC(t, "inline WRITE", pollOne(t, d, cqa), WCSuccess, WCRDMAWrite, 3, -1)
	if !bytes.Equal(rb.mem[8192:8192+len(wr)], wr) {
		t.Errorf("the inline WRITE left %x, want %x", rb.mem[8192:8192+len(wr)], wr)
	}

	var recvs []RecvWR
	var sends []SendWR
	for i := 0; i < 8; i++ {
		recvs = append(recvs, RecvWR{WRID: uint64(10 + i), SGEs: rb.sge(uint64(16384+i*1024), 1024)})
		sends = append(sends, SendWR{WRID: uint64(20 + i), Opcode: WRSend, Flags: SendSignaled | SendInline, Inline: bytes.Repeat([]byte{byte('A' + i)}, 8+i)})
	}
	if err := d.PostRecv(qb, recvs); err != nil {
		t.Fatal(err)
	}
	if err := d.PostSend(qa, sends); err != nil {
		t.Fatalf("a batch of inline SENDs: %v", err)
	}
	for i := 0; i < 8; i++ {
		wantWC(t, "batched inline SEND", pollOne(t, d, cqa), WCSuccess, WCSend, uint64(20+i), -1)
		wantWC(t, "its RECV", pollOne(t, d, cqb), WCSuccess, WCRecv, uint64(10+i), 8+i)
		if off := 16384 + i*1024; !bytes.Equal(rb.mem[off:off+8+i], sends[i].Inline) {
			t.Errorf("inline SEND %d delivered %q", i, rb.mem[off:off+8+i])
		}
	}
}
