package transport

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

// A FLUSH (IBTA 1.5, opcode 0x1C), which an rdma_rxe peer of Linux 6.2 or
// later may send, is NAKed as an invalid request and the responder QP
// fails, as rxe's responder does for a QP whose access flags lack
// IBV_ACCESS_FLUSH_*: no vrdma QP has them (rdma-core v44 has none). The
// packet is answered, not dropped: the requester gets its error at once
// instead of retrying until its retry count is spent.
func TestRCFlushRefused(t *testing.T) {
	for _, feth := range []wire.FETH{
		{Placement: wire.FlushGlobal, Selectivity: wire.FlushRange},
		{Placement: wire.FlushPersistent, Selectivity: wire.FlushRegion},
	} {
		_, _, b := pair(t, abi.QPTypeRC, 1, nil)
		b.regions[1] = &region{buf: make([]byte, 4096), access: abi.AccessRemoteWrite}
		var answers []wire.Packet
		b.tap = func(p *wire.Packet) { answers = append(answers, *p) }
		p := wire.Packet{Opcode: wire.TransportRC | wire.OpFlush, PKey: 0xffff, DestQP: b.qp.cfg.QPN, PSN: b.qp.rsp.epsn,
			AckReq: true, FETH: feth, RETH: wire.RETH{VA: 0, RKey: 1, Length: 64}}
		b.qp.Receive(b, &p, 0)
		if len(answers) != 1 || answers[0].Opcode != wire.TransportRC|wire.OpAcknowledge ||
			answers[0].AETH.Syndrome != wire.SyndromeNAKInvReq || answers[0].PSN != p.PSN {
			t.Fatalf("FLUSH %+v answered with %+v, want one invalid-request NAK of PSN %#x", feth, answers, p.PSN)
		}
		if b.failed == "" || b.event != abi.EventQPReqErr {
			t.Fatalf("responder: failed %q event %v, want %v", b.failed, b.event, abi.EventQPReqErr)
		}
	}
}
