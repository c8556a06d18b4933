package engine

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// consume polls the CQ as a client would: n completions from the consumer
// index, their wr_ids.
func consume(c *CQ, n int) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	cons := shm.Load32(c.mem, abi.RingConsOff)
	var ids []uint64
	for ; n > 0 && cons != shm.Load32(c.mem, abi.RingProdOff); n-- {
		ids = append(ids, binary.LittleEndian.Uint64(c.mem[c.ring.Entry(cons)+abi.CQEWRIDOff:]))
		cons++
	}
	shm.Store32(c.mem, abi.RingConsOff, cons)
	return ids
}

// TestCQResizeKeepsCompletions: the completions not yet polled come out of
// the resized ring at the same indices, in order, none lost or repeated,
// whether the ring grows or shrinks and wherever the indices stand; a size
// below them is refused (CQBelowPendingError) and changes nothing.
func TestCQResizeKeepsCompletions(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		from, pushed, polled int
		to                   int
		wantEntries          int
		wantBelow            bool
	}{
		{"grow", 4, 3, 0, 100, 128, false},
		{"grow after wrapping", 8, 20, 14, 64, 64, false},
		{"shrink to what is held", 64, 40, 37, 3, 4, false},
		{"shrink after wrapping", 16, 50, 45, 5, 8, false},
		{"empty to one", 16, 9, 9, 1, 1, false},
		{"below what is held", 64, 10, 0, 9, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCQ(tc.from)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var next uint64 = 1
			var got []uint64
			// Push and poll in steps so that the indices wrap.
			for pushed := 0; pushed < tc.pushed; {
				step := min(tc.from-1, tc.pushed-pushed)
				for i := 0; i < step; i++ {
					if !c.push(&abi.CQE{WRID: next}) {
						t.Fatalf("push %d failed", next)
					}
					next++
				}
				pushed += step
				if want := tc.polled - len(got); want > 0 {
					got = append(got, consume(c, min(want, step))...)
				}
			}
			_, fd, err := c.Resize(tc.to)
			var below *CQBelowPendingError
			if tc.wantBelow {
				if !errors.As(err, &below) || below.Pending != tc.pushed-tc.polled {
					t.Fatalf("resize to %d with %d held: %v, want a CQBelowPendingError", tc.to, tc.pushed-tc.polled, err)
				}
			} else {
				if err != nil {
					t.Fatalf("resize to %d: %v", tc.to, err)
				}
				unix.Close(fd)
				if c.Ring().Entries != tc.wantEntries {
					t.Fatalf("resize to %d: %d entries, want %d", tc.to, c.Ring().Entries, tc.wantEntries)
				}
			}
			// The rest, then as many again as the ring holds.
			got = append(got, consume(c, tc.pushed)...)
			for i := 0; i < c.Ring().Entries; i++ {
				if !c.push(&abi.CQE{WRID: next}) {
					t.Fatalf("push %d after the resize failed", next)
				}
				next++
			}
			got = append(got, consume(c, c.Ring().Entries)...)
			if len(got) != int(next-1) {
				t.Fatalf("%d completions out of %d", len(got), next-1)
			}
			for i, id := range got {
				if id != uint64(i+1) {
					t.Fatalf("completion %d is wr %d: %v", i, id, got)
				}
			}
		})
	}
}

// TestCQResizeCorruptIndex: a consumer index more than a ring ahead (the
// client's to write) fails the resize with ErrCorruptRing.
func TestCQResizeCorruptIndex(t *testing.T) {
	c, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	shm.Store32(c.mem, abi.RingConsOff, 1000)
	if _, _, err := c.Resize(32); !errors.Is(err, abi.ErrCorruptRing) {
		t.Fatalf("resize with a corrupt consumer index: %v", err)
	}
}
