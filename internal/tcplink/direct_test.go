package tcplink

import (
	"bytes"
	"crypto/tls"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/pki/pkitest"
)

// channels are the two kinds of connection direct writes run on: plain
// TCP, and TLS, whose frames are sealed into records first (seal.go). Each
// returns the TLS config of a node at ip (nil: plain).
func channels(t *testing.T) []channel {
	ca := pkitest.NewCA(t, "vrdma test CA")
	return []channel{
		{"plain", func(string) *tls.Config { return nil }, 0},
		{"TLS", func(ip string) *tls.Config { return mutualTLS(t, ca, ip) }, 1},
	}
}

type channel struct {
	name string
	tls  func(ip string) *tls.Config
	// rxAllocs is what the receiving side allocates per read(2).
	rxAllocs float64
}

// TestDirectWrites: frames written on the caller's goroutine arrive whole
// and in order, also when the receiver stops reading and the socket takes
// only part of a queue, the rest going through the writer.
func TestDirectWrites(t *testing.T) {
	for _, ch := range channels(t) {
		t.Run(ch.name, func(t *testing.T) {
			var eps endpoints
			a := openNode(t, &eps, addrA, 0, func(c *Config) { c.TLS = ch.tls(addrA.String()) })
			gate := make(chan struct{})
			b := openNode(t, &eps, addrB, 0, func(c *Config) { c.TLS = ch.tls(addrB.String()) })
			connectPair(t, a, b)
			// B's reader stops at the next frame until the gate opens, so
			// that A's socket buffer fills up.
			b.sink.hold.Store(&gate)
			const n = 3000
			var want [][]byte
			for i := range n {
				want = append(want, testFrame(addrA, addrB, uint32(i), bytes.Repeat([]byte{byte(i)}, 1000+i%3000)))
			}
			go func() {
				// Open the gate once a direct write of A's has been cut short.
				deadline := time.Now().Add(testTimeout) // a hang guard; the check below fails then
				for a.Stats().DirectShort == 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				close(gate)
			}()
			writeAll(t, a.Link, want, 8)
			waitFor(t, "all frames", func() bool { return b.sink.count() == n })
			checkFrames(t, "A to B", b.sink.got(), want)
			st := a.Stats()
			if st.DirectWrites == 0 || st.DirectShort == 0 {
				t.Fatalf("direct writes %d, cut short %d: want both (the test must exercise the short case)", st.DirectWrites, st.DirectShort)
			}
			if st.DroppedConnLost+st.DroppedQueueFull+st.ProtocolErrors != 0 {
				t.Fatalf("losses or errors: %+v", st)
			}
		})
	}
}

// A frame written directly allocates nothing (the write(2) loop's closure
// used to be allocated on every write). Over TLS the receiving side
// allocates one object per read(2): crypto/tls's reader (atLeastReader,
// which escapes into bytes.Buffer.ReadFrom); sending, sealing included,
// allocates nothing.
func TestDirectWriteAllocs(t *testing.T) {
	for _, ch := range channels(t) {
		t.Run(ch.name, func(t *testing.T) {
			var eps endpoints
			a := openNode(t, &eps, addrA, 0, func(c *Config) { c.TLS = ch.tls(addrA.String()) })
			b := openNode(t, &eps, addrB, 0, func(c *Config) { c.Logger, c.TLS = nil, ch.tls(addrB.String()) })
			b.sink.copy = false
			connectPair(t, a, b)
			frames := [][]byte{testFrame(addrA, addrB, 1, make([]byte, 64))}
			before := a.Stats().DirectWrites
			allocs := testing.AllocsPerRun(1000, func() {
				// Each write from an idle peer: one that finds the writer
				// busy hands it the frames, and a fast loop can keep it so.
				a.awaitIdle()
				if _, err := a.WriteBatch(frames); err != nil {
					t.Fatal(err)
				}
			})
			if d := a.Stats().DirectWrites - before; d == 0 {
				t.Fatal("no direct write: the test must exercise them")
			}
			if allocs > ch.rxAllocs {
				t.Fatalf("%v allocations per frame written directly, want at most %v (the receiver's)", allocs, ch.rxAllocs)
			}
		})
	}
}
