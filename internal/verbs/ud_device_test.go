package verbs

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestUDOnDevice drives UD through the helper on a real device: two UD
// QPs on the device (rxe loops back), an address handle to the port's own
// RoCE v2 GID, and datagrams (a SEND and a SEND_WITH_IMM, in one batch)
// from one to the other. Each receive holds the 40-byte GRH and then the
// payload, as rdma-core delivers it; its completion says IBV_WC_GRH, the
// sender's QPN as src_qp and byte_len 40 + the payload; the device's
// packet counter rises. A datagram with the wrong Q_Key is dropped by the
// device (no completion); the helper refuses an unknown AH and a UD
// transition on an RC QP, and destroys the AH.
func TestUDOnDevice(t *testing.T) {
	d, dev := openTestDevice(t)
	gid := testGID(t, d)
	ra, rb := newRegion(t, d, 64<<10), newRegion(t, d, 64<<10)
	cqa, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	cqb, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	qcap := QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	qa, err := d.CreateUDQP(cqa, cqa, qcap)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := d.CreateUDQP(cqb, cqb, qcap)
	if err != nil {
		t.Fatal(err)
	}
	const qkey = 0x11111111
	for _, q := range []QP{qa, qb} {
		for _, st := range []uint32{QPStateInit, QPStateRTR, QPStateRTS} {
			if err := d.ModifyUDQP(q, st, qkey, 0x100); err != nil {
				t.Fatalf("ModifyUDQP to %d: %v", st, err)
			}
		}
	}
	ah, err := d.CreateAH(AHAttr{DGID: gid.GID, SGIDIndex: uint8(gid.Index), HopLimit: 1, IsGlobal: true})
	if err != nil {
		t.Fatalf("CreateAH: %v", err)
	}
	t.Logf("GID %d %x; UD QP a %+v, b %+v; AH %+v", gid.Index, gid.GID, qa, qb, ah)

	const n = 512 // within MTU 1024
	for i := range ra.mem[:2*n] {
		ra.mem[i] = byte(i*7 + 3)
	}
	if err := d.PostRecv(qb, []RecvWR{{WRID: 1, SGEs: rb.sge(0, GRHSize+n)}, {WRID: 2, SGEs: rb.sge(4096, GRHSize+n)}}); err != nil {
		t.Fatal(err)
	}
	sent := hwCounter(t, dev, "sent_pkts")
	if err := d.PostSendUD(qa, []UDSendWR{
		{WRID: 10, Opcode: WRSend, Flags: SendSignaled, SGEs: ra.sge(0, n), AH: ah.Handle, RemoteQPN: qb.QPN, RemoteQKey: qkey},
		{WRID: 11, Opcode: WRSendWithImm, Flags: SendSignaled, Imm: 0x04030201, SGEs: ra.sge(n, n), AH: ah.Handle, RemoteQPN: qb.QPN, RemoteQKey: qkey},
	}); err != nil {
		t.Fatalf("PostSendUD: %v", err)
	}
	wantWC(t, "first UD send", pollOne(t, d, cqa), WCSuccess, WCSend, 10, -1)
	wantWC(t, "second UD send", pollOne(t, d, cqa), WCSuccess, WCSend, 11, -1)
	for i, off := range []uint64{0, 4096} {
		wc := pollOne(t, d, cqb)
		wantWC(t, "UD receive", wc, WCSuccess, WCRecv, uint64(i+1), GRHSize+n)
		if wc.SrcQP != qa.QPN || wc.Flags&WCFlagGRH == 0 {
			t.Errorf("receive %d: src_qp %#x flags %#x, want the sender's %#x with IBV_WC_GRH", i, wc.SrcQP, wc.Flags, qa.QPN)
		}
		if i == 1 && (wc.Imm != 0x04030201 || wc.Flags&WCFlagWithImm == 0) {
			t.Errorf("receive 1: immediate %#x flags %#x", wc.Imm, wc.Flags)
		}
		if got, want := rb.mem[off+GRHSize:off+GRHSize+n], ra.mem[uint64(i)*n:uint64(i+1)*n]; !bytes.Equal(got, want) {
			t.Errorf("receive %d: the payload after the GRH differs from what was sent", i)
		}
		// RoCE v2 over IPv4: the GRH area's last 20 bytes are the IPv4
		// header (version 4), as rdma-core delivers it.
		if bytes.Equal(gid.GID[:12], []byte{10: 0xff, 11: 0xff}) && rb.mem[off+20]>>4 != 4 {
			t.Errorf("receive %d: the GRH area % x holds no IPv4 header at byte 20", i, rb.mem[off:off+GRHSize])
		}
	}
	// The kernel caches the counters for a while (the hw_counters
	// lifespan): read until they show the two datagrams, with a hang guard.
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := hwCounter(t, dev, "sent_pkts") - sent
		if got >= 2 {
			break
		}
		if time.Now().After(end) {
			t.Errorf("%s sent %d packets for two datagrams", dev, got)
			break
		}
	}

	// The wrong Q_Key: the device drops the datagram.
	if err := d.PostRecv(qb, []RecvWR{{WRID: 3, SGEs: rb.sge(8192, GRHSize+n)}}); err != nil {
		t.Fatal(err)
	}
	if err := d.PostSendUD(qa, []UDSendWR{{WRID: 12, Opcode: WRSend, Flags: SendSignaled, SGEs: ra.sge(0, n), AH: ah.Handle, RemoteQPN: qb.QPN, RemoteQKey: 0x2222}}); err != nil {
		t.Fatal(err)
	}
	wantWC(t, "UD send with the wrong Q_Key", pollOne(t, d, cqa), WCSuccess, WCSend, 12, -1)
	time.Sleep(200 * time.Millisecond) // what would arrive has (rxe loops back at once); not a timing check of the device
	var wcs [1]WC
	if k, err := d.PollCQ(cqb, wcs[:]); err != nil || k != 0 {
		t.Errorf("a datagram with the wrong Q_Key was received: %d %+v %v", k, wcs[0], err)
	}

	// Refusals.
	err = d.PostSendUD(qa, []UDSendWR{{WRID: 13, Opcode: WRSend, SGEs: ra.sge(0, 8), AH: ah.Handle + 100, RemoteQPN: qb.QPN, RemoteQKey: qkey}})
	if !errors.Is(err, ErrDevice) {
		t.Errorf("a UD send naming no AH: %v, want ErrDevice (EINVAL)", err)
	}
	rc, err := d.CreateQP(cqa, cqa, qcap)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.ModifyUDQP(rc, QPStateInit, qkey, 0); !errors.Is(err, ErrDevice) {
		t.Errorf("a UD transition of an RC QP: %v, want ErrDevice (EINVAL)", err)
	}
	if err := d.PostSendUD(rc, []UDSendWR{{WRID: 14, Opcode: WRSend, AH: ah.Handle, RemoteQPN: qb.QPN}}); !errors.Is(err, ErrDevice) {
		t.Errorf("a UD send on an RC QP: %v, want ErrDevice (EINVAL)", err)
	}
	if err := d.DestroyAH(ah); err != nil {
		t.Fatalf("DestroyAH: %v", err)
	}
	if err := d.DestroyAH(ah); !errors.Is(err, ErrDevice) {
		t.Errorf("destroying the AH twice: %v, want ErrDevice (ENOENT)", err)
	}
	for _, q := range []QP{qa, qb, rc} {
		if err := d.DestroyQP(q); err != nil {
			t.Fatal(err)
		}
	}
}
