package vrdma_test

import (
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/fakelink"
)

// TestWireCopyCounters: an RDMA WRITE over software RoCEv2 is one copy of
// its payload by each daemon: the requester's port counts one message
// copied and its bytes gathered into packets (copy_bytes), the responder's
// the bytes it put into memory; neither posted anything to a device.
func TestWireCopyCounters(t *testing.T) {
	w := newWireHosts(t, fakelink.New(1), ibv.MTU1024)
	a, b := wirePair(t, w, ibv.RC)
	const n = 3000 // three packets at an MTU of 1024
	counters := func(x *side) vrdma.Counters {
		t.Helper()
		p, err := x.dev.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		return p.Counters
	}
	ba, bb := counters(a), counters(b)
	fill(a.mr.Bytes()[srcOff:srcOff+n], 7)
	post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, n)},
		RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
	checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCRDMAWrite, n))
	ca, cb := counters(a), counters(b)
	tests := []struct {
		who                        string
		msgs, bytes, verbs, vbytes uint64
		wantMsgs, minBytes         uint64
	}{
		{"requester", ca.CopyMsgs - ba.CopyMsgs, ca.CopyBytes - ba.CopyBytes, ca.PathVerbs - ba.PathVerbs, ca.VerbsBytes - ba.VerbsBytes, 1, n},
		{"responder", cb.CopyMsgs - bb.CopyMsgs, cb.CopyBytes - bb.CopyBytes, cb.PathVerbs - bb.PathVerbs, cb.VerbsBytes - bb.VerbsBytes, 0, n},
	}
	for _, tt := range tests {
		// A lost and resent packet is copied again: at least n, not exactly.
		if tt.msgs != tt.wantMsgs || tt.bytes < tt.minBytes || tt.verbs != 0 || tt.vbytes != 0 {
			t.Errorf("%s: copy_msgs +%d copy_bytes +%d path_verbs +%d verbs_bytes +%d; want copy_msgs +%d, copy_bytes at least +%d, nothing on a device",
				tt.who, tt.msgs, tt.bytes, tt.verbs, tt.vbytes, tt.wantMsgs, tt.minBytes)
		}
	}
}
