package transport

import (
	"bytes"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
)

// The responder sends READ responses, atomic answers and the ACKs behind
// them only as far as the link has room (Env.TxRoom), and the rest as it
// drains: every request completes with its data, and nothing is resent or
// dropped. The fake link fails the test if the responder sends into a
// full queue; it takes room packets, then nothing until the test drains it.
func TestAnswersPacedByLink(t *testing.T) {
	cases := []struct {
		name string
		room int // packets the responder's link takes per drain
		loss float64
	}{
		{"one packet at a time", 1, 0},
		{"a few packets", 7, 0},
		{"room for all", -1, 0},
		{"a few packets, lossy", 7, 0.02},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const mtu, readLen, reads = 256, 16 * 256, 8 // 16 responses per READ
			w, a, b := pair(t, abi.QPTypeRC, 7, func(cf *Config) {
				cf.MaxRdAtomic, cf.MaxDestRdAtomic = 16, 16
				cf.Timeout = 18 // 1.07 s: longer than the link stays full
			})
			w.loss = c.loss
			src := pattern(reads*readLen, 0x3c)
			wbuf := make([]byte, 64)
			counter := make([]byte, 8)
			b.regions[1] = &region{buf: src, va: 0x10000, access: abi.AccessRemoteRead}
			b.regions[2] = &region{buf: wbuf, va: 0x20000, access: abi.AccessRemoteWrite}
			b.regions[3] = &region{buf: counter, va: 0x30000, access: abi.AccessRemoteAtomic}
			b.room = c.room
			dst := make([]byte, reads*readLen)
			fa := make([]byte, 8)
			id := uint64(0)
			post := func(wq WQE) {
				t.Helper()
				id++
				wq.ID, wq.Signaled = id, true
				if err := a.qp.Post(a, &wq, w.now); err != nil {
					t.Fatal(err)
				}
			}
			// READs, then a WRITE whose ACK must wait behind their
			// responses, then an atomic whose answer must too.
			for i := range reads {
				post(WQE{Op: abi.OpRDMARead, Local: [][]byte{dst[i*readLen : (i+1)*readLen]}, Length: readLen, RemoteAddr: 0x10000 + uint64(i*readLen), RKey: 1})
			}
			post(WQE{Op: abi.OpRDMAWrite, Local: [][]byte{pattern(64, 1)}, Length: 64, RemoteAddr: 0x20000, RKey: 2})
			post(WQE{Op: abi.OpAtomicFetchAndAdd, Local: [][]byte{fa}, Length: 8, RemoteAddr: 0x30000, RKey: 3, CompareAdd: 5})
			nodes := []*node{a, b}
			for drains := 0; len(a.sent) < int(id); drains++ {
				if drains > 100_000 {
					t.Fatalf("%d of %d requests completed after %d drains", len(a.sent), id, drains)
				}
				// 10 ms with the queue full (longer than the responder's
				// longest wait for room), then it drains.
				limit := w.now + 10_000_000
				w.run(nodes, limit)
				w.now = max(w.now, limit)
				if c.room >= 0 {
					b.room = c.room // the link drained
				}
			}
			for i, d := range a.sent {
				if d.id != uint64(i+1) || d.status != abi.StatusSuccess {
					t.Fatalf("completion %d: %+v", i, d)
				}
			}
			if !bytes.Equal(dst, src) {
				t.Fatal("the READs brought other bytes than the responder's")
			}
			if !bytes.Equal(wbuf, pattern(64, 1)) || fa[0] != 0 || counter[0] != 5 {
				t.Fatalf("WRITE or atomic went wrong: %x, fetched %d, counter %d", wbuf[:8], fa[0], counter[0])
			}
			if c.loss == 0 {
				if a.resent != 0 || a.retries != [RetryRNR + 1]int{} || len(a.drops) != 0 || len(b.drops) != 0 || b.overRoom != 0 {
					t.Fatalf("resent %d packets (go-back-Ns by cause %v); drops A %v, B %v; %d sent into a full link: want none",
						a.resent, a.retries, a.drops, b.drops, b.overRoom)
				}
			}
			t.Logf("%d packets sent, %d resent, go-back-Ns %v", w.sent, a.resent, a.retries)
		})
	}
}
