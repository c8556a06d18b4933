package abi

import (
	"errors"
	"fmt"
)

// A ring is a single-producer single-consumer array of fixed-size entries in
// shared memory, preceded by a 256-byte header:
//
//	offset   0  producer index (u32, written only by the producer)
//	offset  64  consumer index (u32, written only by the consumer)
//	offset 128  notify word   (u32: the consumer sleeps and wants a doorbell,
//	            or, for a completion queue, the CQ is armed)
//	offset 132  error word    (u32, written by the daemon: RingErr* bits)
//	offset 136  held word     (u32, completion queues: completions the library
//	            holds outside the ring, made by the direct path; they count
//	            toward the CQ's capacity)
//	offset 256  entries: Entries × Stride bytes
//
// The indices run freely modulo 2^32; the slot of index i is i & (Entries-1);
// the ring is empty when prod == cons and full when prod-cons == Entries. A
// reader validates the other side's index before using it: prod-cons above
// Entries is a corrupt ring (the pvrdma rule, with the wrap bit generalised).
// Producer and consumer indices sit on separate cache lines.
const (
	RingHeaderSize = 256
	RingProdOff    = 0
	RingConsOff    = 64
	RingNotifyOff  = 128
	RingErrOff     = 132
	RingHeldOff    = 136
)

// Error-word bits.
const (
	RingErrOverrun = 1 << 0 // a completion queue overflowed: completions were lost
	RingErrCorrupt = 1 << 1 // the client wrote an impossible index
)

// Entry sizes.
const (
	SendWQEHeader  = 64 // fixed part of a send WQE; SGEs or inline data follow
	RecvWQEHeader  = 16 // fixed part of a receive WQE; SGEs follow
	SGESize        = 16 // addr u64, length u32, lkey u32
	CQESize        = 32 // one completion
	CQETSSize      = 64 // one completion of a timestamped CQ: a CQE, then its two clocks (CQETimestampOff)
	MaxRingEntries = 1 << 22
)

// MaxRingEntries bounds every ring: a completion queue's (the largest,
// MaxCQE in package engine: 128 MiB of entries) and a work queue's (whose
// daemon bounds them lower: engine.MaxQPWR).
//
// MaxInline is the most inline data a send queue entry carries: the body
// of a 1 KiB entry, the size an entry of MaxSGE gather entries takes anyway.
const MaxInline = 1024 - SendWQEHeader

// ErrCorruptRing reports a ring whose indices the other side made impossible.
var ErrCorruptRing = errors.New("ring indices are corrupt: producer is more than one ring ahead of consumer")

// RingLayout describes one ring inside a shared region.
type RingLayout struct {
	Offset  int // where the header starts in the region
	Entries int // power of two
	Stride  int // bytes per entry, power of two
}

// Size is the bytes the ring occupies: header plus entries.
func (l RingLayout) Size() int { return RingHeaderSize + l.Entries*l.Stride }

// Entry returns the byte offset of slot idx&(Entries-1) within the region.
func (l RingLayout) Entry(idx uint32) int {
	return l.Offset + RingHeaderSize + int(idx&uint32(l.Entries-1))*l.Stride
}

// Validate checks the layout against the size of the region that holds it.
func (l RingLayout) Validate(regionSize int) error {
	if l.Entries <= 0 || l.Entries > MaxRingEntries || l.Entries&(l.Entries-1) != 0 {
		return fmt.Errorf("ring entries %d: must be a power of two from 1 to %d", l.Entries, MaxRingEntries)
	}
	if l.Stride < 16 || l.Stride&(l.Stride-1) != 0 {
		return fmt.Errorf("ring stride %d: must be a power of two of at least 16", l.Stride)
	}
	// Compare without computing Offset+Size first: that sum can overflow int
	// and wrap into a layout that seems to fit.
	if l.Offset < 0 || l.Offset%RingHeaderSize != 0 || regionSize < RingHeaderSize ||
		l.Offset > regionSize-RingHeaderSize ||
		l.Stride > (regionSize-l.Offset-RingHeaderSize)/l.Entries {
		return fmt.Errorf("ring at %d of %d bytes does not fit in a region of %d bytes", l.Offset, l.Size(), regionSize)
	}
	return nil
}

// Pending returns how many entries lie between cons and prod, or
// ErrCorruptRing if that is more than the ring holds.
func (l RingLayout) Pending(prod, cons uint32) (int, error) {
	n := prod - cons
	if n > uint32(l.Entries) {
		return 0, ErrCorruptRing
	}
	return int(n), nil
}

// RoundPow2 returns the smallest power of two ≥ n (1 for n ≤ 1).
func RoundPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// SendStride is the entry size of a send queue that carries up to maxSGE
// gather entries or maxInline bytes of inline data.
func SendStride(maxSGE, maxInline int) int {
	body := max(maxSGE*SGESize, maxInline)
	return RoundPow2(SendWQEHeader + body)
}

// RecvStride is the entry size of a receive queue with up to maxSGE entries.
func RecvStride(maxSGE int) int { return RoundPow2(RecvWQEHeader + maxSGE*SGESize) }
