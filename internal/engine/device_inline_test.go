package engine

import (
	"bytes"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
	"github.com/vrdma/vrdma/internal/verbs"
)

// TestDeviceInlineSend: a bound QP asks the device for the inline size the
// client asked and reports no more than the device granted; an inline SEND
// or WRITE goes to the device with IBV_SEND_INLINE and its bytes (no SGEs,
// nothing to register); a ring of inline requests too large for one
// message goes in several batches, each one the helper takes, and none
// fails.
func TestDeviceInlineSend(t *testing.T) {
	tests := []struct {
		name  string
		n     int // requests
		size  int // inline bytes each
		write bool
	}{
		{"one 16-byte SEND", 1, 16, false},
		{"one WRITE", 1, 200, true},
		{"32 of 900 bytes: over one message", 32, 900, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDevice{}
			q, cq, _ := deviceQPInRTS(t, f, proto.QPCaps{MaxSendWR: 32, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 960})
			if c := q.Caps(); c.MaxInlineData != 960 {
				t.Fatalf("max_inline_data %d, want the 960 asked, which the device granted", c.MaxInlineData)
			}
			sq := q.SQ()
			for i := 0; i < tt.n; i++ {
				w := abi.SendWQE{WRID: uint64(i), Opcode: abi.OpSend, Flags: abi.SendInline | abi.SendSignaled}
				if tt.write {
					w.Opcode, w.RemoteAddr, w.RKey = abi.OpRDMAWrite, 0x9000, 0x77
				}
				data := bytes.Repeat([]byte{byte('a' + i%26)}, tt.size)
				if err := abi.PutSendWQE(q.mem[sq.Entry(uint32(i)):sq.Entry(uint32(i))+sq.Stride], &w, nil, data); err != nil {
					t.Fatal(err)
				}
			}
			shm.Store32(q.mem, abi.RingProdOff, uint32(tt.n))
			q.kickWorker()
			count := func() int {
				f.mu.Lock()
				defer f.mu.Unlock()
				n := 0
				for _, b := range f.sends {
					n += len(b)
				}
				return n
			}
			waitFor(t, "the inline requests on the device", func() bool { return count() == tt.n || q.State() == abi.QPStateErr })
			if st := q.State(); st != abi.QPStateRTS {
				t.Fatalf("the QP is %v, want RTS", st)
			}
			if n := shm.Load32(cq.mem, cq.ring.Offset+abi.RingProdOff); n != 0 {
				t.Fatalf("%d completions before the device gave any", n)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			i := 0
			for _, b := range f.sends {
				if _, err := verbs.AppendPostSend(nil, verbs.QP{}, b); err != nil {
					t.Fatalf("a batch of %d the helper cannot take: %v", len(b), err)
				}
				for _, w := range b {
					want := bytes.Repeat([]byte{byte('a' + i%26)}, tt.size)
					if w.Flags&verbs.SendInline == 0 || len(w.SGEs) != 0 || !bytes.Equal(w.Inline, want) {
						t.Fatalf("request %d went as flags %#x, SGEs %v, %d inline bytes; want IBV_SEND_INLINE with its %d bytes", i, w.Flags, w.SGEs, len(w.Inline), tt.size)
					}
					if tt.write && (w.Opcode != verbs.WRRDMAWrite || w.RemoteAddr != 0x9000 || w.RKey != 0x77) {
						t.Fatalf("the WRITE went as %+v", w)
					}
					i++
				}
			}
			if tt.n*tt.size > verbs.MaxPostBody && len(f.sends) < 2 {
				t.Fatalf("%d inline bytes in %d batch(es)", tt.n*tt.size, len(f.sends))
			}
		})
	}
}
