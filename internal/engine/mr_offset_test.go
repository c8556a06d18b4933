package engine

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// postAndWait posts w on x's send queue (its first request) and returns its
// completion.
func postAndWait(t *testing.T, x *QP, w *abi.SendWQE, sgl []abi.SGE) abi.CQE {
	t.Helper()
	sq := x.SQ()
	if err := abi.PutSendWQE(x.mem[sq.Entry(0):sq.Entry(0)+sq.Stride], w, sgl, nil); err != nil {
		t.Fatal(err)
	}
	shm.Store32(x.mem, abi.RingProdOff, 1)
	x.kickWorker()
	cq := x.SendCQ()
	deadline := time.Now().Add(10 * time.Second) // hang guard
	for shm.Load32(cq.mem, cq.ring.Offset+abi.RingProdOff) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no completion")
		}
		time.Sleep(time.Millisecond)
	}
	var c abi.CQE
	abi.ParseCQE(cq.mem[cq.ring.Entry(0):], &c)
	return c
}

// TestMRAtMemfdOffset: a region registered as bytes [N, N+L) of a memfd
// (how the guest library registers application memory) is those bytes: a
// WRITE at offset x of the region lands at memfd byte N+x, a READ there
// reads it, and a request reaching outside [0, L) — into the memfd bytes
// around the region — fails with REM_ACCESS_ERR and leaves them alone.
func TestMRAtMemfdOffset(t *testing.T) {
	page := uint64(os.Getpagesize())
	const length = 1000
	n := page + 123 // the region's offset in the memfd, inside its second page
	const vaddr = 0x7f00_1234_5000 + 123
	tests := []struct {
		name   string
		op     abi.Opcode
		at     int64 // offset in the region of the first byte
		size   uint32
		status abi.Status
	}{
		{"write inside", abi.OpRDMAWrite, 200, 64, abi.StatusSuccess},
		{"write at the start", abi.OpRDMAWrite, 0, 16, abi.StatusSuccess},
		{"write to the last byte", abi.OpRDMAWrite, length - 16, 16, abi.StatusSuccess},
		{"read inside", abi.OpRDMARead, 200, 64, abi.StatusSuccess},
		{"write one byte past the end", abi.OpRDMAWrite, length - 15, 16, abi.StatusRemAccessErr},
		{"write at the length", abi.OpRDMAWrite, length, 1, abi.StatusRemAccessErr},
		{"write one byte before the start", abi.OpRDMAWrite, -1, 16, abi.StatusRemAccessErr},
		{"read one byte past the end", abi.OpRDMARead, length - 15, 16, abi.StatusRemAccessErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, _ := connectedPair(t)
			pd := x.PD()
			// The owner's view of the whole memfd, and the region in it.
			owner, err := shm.NewRegion("owner", int(3*page))
			if err != nil {
				t.Fatal(err)
			}
			defer owner.Close()
			for i := range owner.Bytes() {
				owner.Bytes()[i] = byte(i*13 + 1)
			}
			before := bytes.Clone(owner.Bytes())
			fd, err := unix.Dup(owner.FD())
			if err != nil {
				t.Fatal(err)
			}
			r, err := shm.MapRegionRange(fd, n, length)
			if err != nil {
				t.Fatal(err)
			}
			mr, err := RegisterMR(pd, r, vaddr, length, abi.AccessLocalWrite|abi.AccessRemoteWrite|abi.AccessRemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Deregister()
			// The initiator's own buffer.
			src, err := shm.NewRegion("src", int(page))
			if err != nil {
				t.Fatal(err)
			}
			local, err := RegisterMR(pd, src, shm.Addr(src.Bytes()), page, abi.AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer local.Deregister()
			for i := range src.Bytes() {
				src.Bytes()[i] = byte(0xA0 + i)
			}

			w := abi.SendWQE{WRID: 7, Opcode: tt.op, Flags: abi.SendSignaled, RemoteAddr: uint64(int64(vaddr) + tt.at), RKey: mr.Key()}
			c := postAndWait(t, x, &w, []abi.SGE{{Addr: shm.Addr(src.Bytes()), Length: tt.size, LKey: local.Key()}})
			if c.WRID != 7 || c.Status != tt.status {
				t.Fatalf("completion %v, want status %v", c, tt.status)
			}
			want := bytes.Clone(before)
			at := int64(n) + tt.at
			switch {
			case tt.status != abi.StatusSuccess:
			case tt.op == abi.OpRDMAWrite:
				copy(want[at:], src.Bytes()[:tt.size])
			case tt.op == abi.OpRDMARead:
				if got := src.Bytes()[:tt.size]; !bytes.Equal(got, before[at:at+int64(tt.size)]) {
					t.Errorf("READ at %d of the region got %x, want memfd bytes %d.. %x", tt.at, got, at, before[at:at+int64(tt.size)])
				}
			}
			if got := owner.Bytes(); !bytes.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("memfd byte %d is %#x, want %#x (the region is bytes %d..%d)", i, got[i], want[i], n, n+length)
					}
				}
			}
		})
	}
}
