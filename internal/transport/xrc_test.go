package transport

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

// XRC is RC with XRC opcodes: every request carries the XRCETH of its
// work request's SRQN, every response is an XRC opcode without one; the
// target asks its Env for the SRQ each request names before it takes a
// receive, and answers a number outside its domain with NAK invalid
// request, failing the requester's request with REM_INV_REQ_ERR.
func TestXRC(t *testing.T) {
	tests := []struct {
		name   string
		op     abi.Opcode
		srqn   uint32
		status abi.Status
	}{
		{"SEND of three packets to the domain's SRQ", abi.OpSend, 7, abi.StatusSuccess},
		{"WRITE to the domain's SRQ", abi.OpRDMAWrite, 7, abi.StatusSuccess},
		{"SEND to an SRQ of another domain", abi.OpSend, 8, abi.StatusRemInvReqErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, a, b := pair(t, abi.QPTypeRC, 3, func(c *Config) { c.XRC = true })
			b.xrcSRQs = map[uint32]bool{7: true}
			b.regions[1] = &region{buf: make([]byte, 4096), access: abi.AccessRemoteWrite}
			b.recvs = []Recv{{ID: 5, Spans: [][]byte{make([]byte, 1024)}, Length: 1024}}
			var reqs, resps int
			a.tap = func(p *wire.Packet) {
				reqs++
				if p.Opcode.Transport() != wire.TransportXRC || p.Opcode.Flags()&wire.HasXRCETH == 0 || p.XRCETH.SRQN != tt.srqn {
					t.Errorf("request %v with XRCETH %+v, want an XRC request naming %d", p.Opcode, p.XRCETH, tt.srqn)
				}
			}
			b.tap = func(p *wire.Packet) {
				resps++
				if p.Opcode.Transport() != wire.TransportXRC || p.Opcode.Flags()&wire.HasXRCETH != 0 {
					t.Errorf("response %v, want an XRC response without XRCETH", p.Opcode)
				}
			}
			wqe := WQE{ID: 1, Op: tt.op, Signaled: true, Local: [][]byte{pattern(600, 1)}, Length: 600, RKey: 1, SRQN: tt.srqn}
			if err := a.qp.Post(a, &wqe, 0); err != nil {
				t.Fatal(err)
			}
			w.run([]*node{a, b}, 1e13)
			if len(a.sent) != 1 || a.sent[0].status != tt.status {
				t.Fatalf("requester completions %+v, want %v", a.sent, tt.status)
			}
			if reqs == 0 || resps == 0 {
				t.Fatalf("%d requests, %d responses", reqs, resps)
			}
			if len(b.selected) == 0 || b.selected[0] != tt.srqn {
				t.Errorf("the target selected %v, want %d first", b.selected, tt.srqn)
			}
			if tt.status != abi.StatusSuccess {
				if b.failed == "" || b.event != abi.EventQPReqErr {
					t.Errorf("target: failed %q event %v, want a request error", b.failed, b.event)
				}
				if len(b.recvd) != 0 {
					t.Errorf("the target received %+v", b.recvd)
				}
				return
			}
			if tt.op == abi.OpSend && (len(b.recvd) != 1 || b.recvd[0].c.Bytes != 600) {
				t.Errorf("target receives %+v, want one of 600 bytes", b.recvd)
			}
		})
	}
}
