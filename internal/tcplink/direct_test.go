package tcplink

import (
	"bytes"
	"testing"
	"time"
)

// TestDirectWrites: frames written on the caller's goroutine arrive whole
// and in order, also when the receiver stops reading and the socket takes
// only part of a queue, the rest going through the writer.
func TestDirectWrites(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, nil)
	gate := make(chan struct{})
	b := openNode(t, &eps, addrB, 0, nil)
	connectPair(t, a, b)
	// B's reader stops at the next frame until the gate opens, so that
	// A's socket buffer fills up.
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
}

// A frame written directly allocates nothing (the write(2) loop's closure
// used to be allocated on every write).
func TestDirectWriteAllocs(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, nil)
	b := openNode(t, &eps, addrB, 0, func(c *Config) { c.Logger = nil })
	b.sink.copy = false
	connectPair(t, a, b)
	frames := [][]byte{testFrame(addrA, addrB, 1, make([]byte, 64))}
	before := a.Stats().DirectWrites
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := a.WriteBatch(frames); err != nil {
			t.Fatal(err)
		}
	})
	if d := a.Stats().DirectWrites - before; d == 0 {
		t.Fatal("no direct write: the test must exercise them")
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per frame written directly", allocs)
	}
}
