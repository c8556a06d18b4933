package verbs

import (
	"bytes"
	"testing"
)

// TestSRQOnDevice: a shared receive queue on a real device through the
// helper. It is made with the entries asked (at least), queried, its limit
// armed and read back; two RC QPs receive from it, each connected to its
// own sender; receives posted to the SRQ in one batch take the SENDs of
// both, and each completion names the QP that received (its QPN) with the
// bytes in the receive's buffer; the QPs and then the SRQ are destroyed.
func TestSRQOnDevice(t *testing.T) {
	d, _ := openTestDevice(t)
	gid := testGID(t, d)
	ra, rb := newRegion(t, d, 64<<10), newRegion(t, d, 64<<10)
	srq, err := d.CreateSRQ(SRQAttr{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatalf("CreateSRQ: %v", err)
	}
	if err := d.ModifySRQ(srq, SRQLimit, SRQAttr{Limit: 2}); err != nil {
		t.Fatalf("ModifySRQ (limit 2): %v", err)
	}
	a, err := d.QuerySRQ(srq)
	if err != nil {
		t.Fatalf("QuerySRQ: %v", err)
	}
	if a.MaxWR < 16 || a.MaxSGE < 1 || a.Limit != 2 {
		t.Errorf("the SRQ has %+v, want at least 16 entries and 1 SGE, limit 2", a)
	}
	cqa, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	cqb, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	qcap := QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	var senders, receivers [2]QP
	for i := range senders {
		if senders[i], err = d.CreateQP(cqa, cqa, qcap); err != nil {
			t.Fatal(err)
		}
		if receivers[i], err = d.CreateQPOnSRQ(cqb, cqb, srq, qcap); err != nil {
			t.Fatalf("a QP on the SRQ: %v", err)
		}
		connect(t, d, senders[i], receivers[i], gid, 0x10+uint32(i), 0x20+uint32(i))
		connect(t, d, receivers[i], senders[i], gid, 0x20+uint32(i), 0x10+uint32(i))
	}
	var recvs []RecvWR
	for i := 0; i < 4; i++ {
		recvs = append(recvs, RecvWR{WRID: uint64(100 + i), SGEs: rb.sge(uint64(i)*4096, 4096)})
	}
	if err := d.PostSRQRecv(srq, recvs); err != nil {
		t.Fatalf("PostSRQRecv: %v", err)
	}
	// Three SENDs: two from the first sender, one from the second.
	for i, from := range []int{0, 0, 1} {
		msg := bytes.Repeat([]byte{byte('a' + i)}, 100+i)
		copy(ra.mem[i*4096:], msg)
		if err := d.PostSend(senders[from], []SendWR{{WRID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGEs: ra.sge(uint64(i)*4096, uint32(len(msg)))}}); err != nil {
			t.Fatal(err)
		}
		wantWC(t, "SEND", pollOne(t, d, cqa), WCSuccess, WCSend, uint64(i), -1)
		rc := pollOne(t, d, cqb)
		wantWC(t, "RECV from the SRQ", rc, WCSuccess, WCRecv, uint64(100+i), len(msg))
		if rc.QPN != receivers[from].QPN {
			t.Errorf("SEND %d was received on QPN %d, want %d (the receiver of sender %d)", i, rc.QPN, receivers[from].QPN, from)
		}
		if off := int(rc.WRID-100) * 4096; !bytes.Equal(rb.mem[off:off+len(msg)], msg) {
			t.Errorf("SEND %d left %q in its receive", i, rb.mem[off:off+8])
		}
	}
	for i := range senders {
		if err := d.DestroyQP(receivers[i]); err != nil {
			t.Fatal(err)
		}
		if err := d.DestroyQP(senders[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DestroySRQ(srq); err != nil {
		t.Fatalf("DestroySRQ: %v", err)
	}
	if _, err := d.QuerySRQ(srq); err == nil {
		t.Error("a destroyed SRQ answered a query")
	}
}
