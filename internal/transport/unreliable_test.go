package transport

import (
	"bytes"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

// UC: nothing is acknowledged; requests complete as they go out; a lost
// packet loses its message and the next message still arrives.
func TestUCLossDropsMessage(t *testing.T) {
	w, a, b := pair(t, abi.QPTypeUC, 1, nil)
	bufs := make([][]byte, 3)
	for i := range bufs {
		bufs[i] = make([]byte, 1024)
		b.recvs = append(b.recvs, Recv{ID: uint64(i), Spans: [][]byte{bufs[i]}, Length: 1024})
	}
	m1, m2 := pattern(600, 1), pattern(600, 2)
	if err := a.qp.Post(a, &WQE{ID: 1, Op: abi.OpSend, Local: [][]byte{m1}, Length: 600}, 0); err != nil {
		t.Fatal(err)
	}
	w.queue = w.queue[:1] // the 2nd and 3rd packets of the first message are lost
	if err := a.qp.Post(a, &WQE{ID: 2, Op: abi.OpSend, Local: [][]byte{m2}, Length: 600}, 0); err != nil {
		t.Fatal(err)
	}
	w.run([]*node{a, b}, 1e12)
	if len(a.sent) != 2 || a.sent[0].status != abi.StatusSuccess || a.sent[1].status != abi.StatusSuccess {
		t.Fatalf("UC requester completions %+v, want 2 successes", a.sent)
	}
	if len(b.recvd) != 1 || b.recvd[0].c.Bytes != 600 || b.recvd[0].id != 0 || !bytes.Equal(bufs[0][:600], m2) {
		t.Fatalf("UC responder: %+v; want the second message in the first receive", b.recvd)
	}
	if b.drops[DropSequence]+b.drops[DropInvalid] == 0 || w.sent != 6 {
		t.Fatalf("drops %v, packets %d", b.drops, w.sent)
	}
	if a.naks+b.naks+b.rnrs != 0 {
		t.Fatal("UC sent a NAK")
	}
}

func TestUDQKeyAndGRH(t *testing.T) {
	w, a, b := pair(t, abi.QPTypeUD, 1, nil)
	buf := make([]byte, 40+200)
	b.recvs = append(b.recvs, Recv{ID: 7, Spans: [][]byte{buf}, Length: uint32(len(buf))})
	msg := pattern(257, 4)
	post := func(id uint64, qkey uint32, n int) {
		if err := a.qp.Post(a, &WQE{ID: id, Op: abi.OpSendImm, Imm: 99, Local: [][]byte{msg[:n]}, Length: uint32(n), Dest: addr4, DestQPN: 0x12, QKey: qkey}, w.now); err != nil {
			t.Fatal(err)
		}
	}
	post(1, 0x1234, 200)     // wrong Q_Key: dropped
	post(2, 0x11111111, 200) // delivered
	post(3, 0x11111111, 257) // longer than the MTU of 256: LOC_LEN_ERR, nothing sent
	w.run([]*node{a, b}, 1e12)
	if len(a.sent) != 3 || a.sent[0].status != abi.StatusSuccess || a.sent[2].status != abi.StatusLocLenErr {
		t.Fatalf("UD completions %+v", a.sent)
	}
	_ = wire.GSIQKey
	if b.drops[DropQKey] != 1 {
		t.Fatalf("Q_Key drops %d, want 1", b.drops[DropQKey])
	}
	if len(b.recvd) != 1 || b.recvd[0].c.Bytes != 240 || b.recvd[0].c.Flags&abi.WCWithGRH == 0 || b.recvd[0].c.SrcQP != 0x11 || b.recvd[0].c.Imm != 99 {
		t.Fatalf("UD receive %+v", b.recvd)
	}
	if b.recvd[0].c.SL != abi.WCSLRoCEv2IPv4 {
		t.Errorf("UD receive from an IPv4 address: sl 0x%x, want 0x%x (an IPv4 header in the GRH area, as mlx5 says it)", b.recvd[0].c.SL, abi.WCSLRoCEv2IPv4)
	}
	if buf[0] != 0x60 || !bytes.Equal(buf[40:], msg[:200]) {
		t.Fatal("the GRH area or the payload is wrong")
	}
}
