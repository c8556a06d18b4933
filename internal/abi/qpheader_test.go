package abi

import "testing"

// TestQPHeaderWords: the QP's words sit in the send ring's header, aligned,
// clear of the ring's own words and of each other, and the library's busy
// word on a cache line without any word the daemon writes.
func TestQPHeaderWords(t *testing.T) {
	ring := []int{RingProdOff, RingConsOff, RingNotifyOff, RingErrOff, RingHeldOff}
	daemon := []int{QPStateOff, SQDoneOff, QPRevokeOff, RingConsOff, RingNotifyOff, RingErrOff}
	qp := []int{QPStateOff, SQDoneOff, QPRevokeOff, QPDirectBusyOff}
	seen := map[int]bool{}
	for _, off := range ring {
		seen[off] = true
	}
	for _, off := range qp {
		if off%4 != 0 || off < 0 || off+4 > RingHeaderSize {
			t.Errorf("word at %d is not an aligned word of the %d-byte header", off, RingHeaderSize)
		}
		if seen[off] {
			t.Errorf("word at %d is taken twice", off)
		}
		seen[off] = true
	}
	for _, off := range daemon {
		if off/64 == QPDirectBusyOff/64 {
			t.Errorf("the daemon's word at %d shares a cache line with the library's busy word", off)
		}
	}
}
