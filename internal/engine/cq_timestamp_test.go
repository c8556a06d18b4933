package engine

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"golang.org/x/sys/unix"
)

func monotonicNow(t *testing.T) uint64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// TestTimestampedCQ: a timestamped CQ's entries are abi.CQETSSize bytes,
// each with CLOCK_MONOTONIC and CLOCK_REALTIME read when the daemon wrote
// it (between the test's readings before and after the push); its
// footprint is TimestampedCQBytes; a resize keeps the stride and the
// timestamps of the completions it moves. An ordinary CQ keeps 32-byte
// entries.
func TestTimestampedCQ(t *testing.T) {
	for _, tc := range []struct {
		name   string
		make   func(int) (*CQ, error)
		bytes  func(int) uint64
		stride int
	}{
		{"ordinary", NewCQ, CQBytes, abi.CQESize},
		{"timestamped", NewTimestampedCQ, TimestampedCQBytes, abi.CQETSSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.make(10)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if r := c.Ring(); r.Stride != tc.stride || r.Entries != 16 {
				t.Fatalf("ring %+v: want 16 entries of %d bytes", r, tc.stride)
			}
			if got, want := c.Footprint(), tc.bytes(10); got != want || got != uint64(abi.RingHeaderSize+16*tc.stride) {
				t.Fatalf("footprint %d, want %d (%d-byte entries)", got, want, tc.stride)
			}
			if c.Timestamped() != (tc.stride == abi.CQETSSize) {
				t.Fatalf("Timestamped() = %v", c.Timestamped())
			}
			mono0, wall0 := monotonicNow(t), uint64(time.Now().UnixNano())
			if !c.push(&abi.CQE{WRID: 7}) {
				t.Fatal("push failed")
			}
			mono1, wall1 := monotonicNow(t), uint64(time.Now().UnixNano())
			check := func(what string) {
				t.Helper()
				r := c.Ring()
				e := c.mem[r.Entry(0):r.Entry(1)]
				if id := binary.LittleEndian.Uint64(e[abi.CQEWRIDOff:]); id != 7 {
					t.Fatalf("%s: wr_id %d, want 7", what, id)
				}
				if tc.stride == abi.CQESize {
					return
				}
				mono := binary.LittleEndian.Uint64(e[abi.CQETimestampOff:])
				wall := binary.LittleEndian.Uint64(e[abi.CQEWallclockOff:])
				if mono < mono0 || mono > mono1 {
					t.Errorf("%s: timestamp %d not within [%d, %d] (CLOCK_MONOTONIC before and after)", what, mono, mono0, mono1)
				}
				if wall < wall0 || wall > wall1 {
					t.Errorf("%s: wallclock %d not within [%d, %d] (CLOCK_REALTIME before and after)", what, wall, wall0, wall1)
				}
			}
			check("pushed")
			if got := c.BytesFor(100); got != uint64(abi.RingHeaderSize+128*tc.stride) {
				t.Fatalf("BytesFor(100) = %d, want 128 entries of %d bytes", got, tc.stride)
			}
			old, fd, err := c.Resize(100)
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(fd)
			if old != tc.bytes(10) {
				t.Errorf("resize gave back %d, want %d", old, tc.bytes(10))
			}
			if r := c.Ring(); r.Stride != tc.stride || r.Entries != 128 {
				t.Fatalf("resized ring %+v: want 128 entries of %d bytes", r, tc.stride)
			}
			check("resized")
		})
	}
}
