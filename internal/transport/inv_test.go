package transport

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

// SEND with Invalidate on RC: the last packet carries the IETH (SEND Only
// or SEND Last with Invalidate), the responder invalidates that rkey and
// completes the receive WITH_INV; an rkey it cannot invalidate is NAKed as
// an invalid request and the receive completes REM_INV_REQ_ERR.
func TestRCSendWithInvalidate(t *testing.T) {
	cases := []struct {
		name    string
		length  uint32
		bound   bool
		opcodes []wire.Opcode
		sender  abi.Status
		recv    abi.Status
	}{
		{"one packet", 100, true, []wire.Opcode{wire.OpSendOnlyInv}, abi.StatusSuccess, abi.StatusSuccess},
		{"three packets", 2500, true, []wire.Opcode{wire.OpSendFirst, wire.OpSendMiddle, wire.OpSendLastInv}, abi.StatusSuccess, abi.StatusSuccess},
		{"no such window", 100, false, []wire.Opcode{wire.OpSendOnlyInv}, abi.StatusRemInvReqErr, abi.StatusRemInvReqErr},
	}
	const rkey = 0x1234_5602
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, a, b := pair(t, abi.QPTypeRC, 1, func(cf *Config) { cf.MTU = 1024 })
			b.windows = map[uint32]bool{}
			if c.bound {
				b.windows[rkey] = true
			}
			var seen []wire.Opcode
			a.tap = func(p *wire.Packet) {
				seen = append(seen, p.Opcode.Op())
				if p.Opcode.Flags()&wire.HasIETH != 0 && p.InvRKey != rkey {
					t.Errorf("IETH carries %#x, want %#x", p.InvRKey, rkey)
				}
			}
			dst := make([]byte, 4096)
			b.recvs = []Recv{{ID: 5, Spans: [][]byte{dst}, Length: uint32(len(dst))}}
			src := make([]byte, c.length)
			for i := range src {
				src[i] = byte(i)
			}
			wqe := WQE{ID: 1, Op: abi.OpSendInv, Imm: rkey, Signaled: true, Local: [][]byte{src}, Length: c.length}
			if err := a.qp.Post(a, &wqe, 0); err != nil {
				t.Fatal(err)
			}
			w.run([]*node{a, b}, 1e13)
			if len(seen) != len(c.opcodes) {
				t.Fatalf("requester sent %v, want %v", seen, c.opcodes)
			}
			for i := range seen {
				if seen[i] != c.opcodes[i] {
					t.Fatalf("requester sent %v, want %v", seen, c.opcodes)
				}
			}
			if len(a.sent) != 1 || a.sent[0].status != c.sender {
				t.Fatalf("requester completions %+v, want %v", a.sent, c.sender)
			}
			if len(b.recvd) != 1 || b.recvd[0].c.Status != c.recv {
				t.Fatalf("responder completions %+v, want %v", b.recvd, c.recv)
			}
			got := b.recvd[0].c
			if !c.bound {
				if b.failed == "" || b.event != abi.EventQPReqErr {
					t.Fatalf("responder: failed %q event %v, want %v", b.failed, b.event, abi.EventQPReqErr)
				}
				return
			}
			if got.Flags != abi.WCWithInv || got.InvRKey != rkey || got.Bytes != c.length {
				t.Fatalf("receive completed %+v, want WITH_INV of %#x, %d bytes", got, rkey, c.length)
			}
			if b.windows[rkey] {
				t.Fatal("the window is still bound after the SEND with Invalidate")
			}
			for i := uint32(0); i < c.length; i++ {
				if dst[i] != byte(i) {
					t.Fatalf("byte %d is %d, want %d", i, dst[i], byte(i))
				}
			}
		})
	}
}
