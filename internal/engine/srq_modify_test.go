package engine

import (
	"errors"
	"slices"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// postSRQ posts n receive requests to r as the library does, wr_ids from
// first on; the client's producer index is the ring's.
func postSRQ(t *testing.T, r *RQ, first uint64, n int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	prod := shm.Load32(r.mem, r.ring.Offset+abi.RingProdOff)
	for i := range n {
		off := r.ring.Entry(prod)
		if err := abi.PutRecvWQE(r.mem[off:off+r.ring.Stride], first+uint64(i), []abi.SGE{{Addr: 1, Length: 8}}); err != nil {
			t.Fatal(err)
		}
		prod++
	}
	shm.Store32(r.mem, r.ring.Offset+abi.RingProdOff, prod)
}

// popSRQ takes n requests and returns their wr_ids.
func popSRQ(t *testing.T, r *RQ, n int) []uint64 {
	t.Helper()
	var ids []uint64
	for range n {
		var w abi.RecvWQE
		if res := r.pop(&w); res != popOK {
			t.Fatalf("pop: %d after %v", res, ids)
		}
		ids = append(ids, w.WRID)
	}
	return ids
}

func seq(first uint64, n int) []uint64 {
	var s []uint64
	for i := range n {
		s = append(s, first+uint64(i))
	}
	return s
}

// TestSRQLimitEventOnce: an armed limit raises EventSRQLimit once, when
// a request taken leaves fewer posted than the limit, and is disarmed;
// it fires again only once armed again; a limit above the SRQ's size is
// refused (SRQLimitError).
func TestSRQLimitEventOnce(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	r, err := NewSRQ(a.NewPD(), 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ev := &events{}
	r.Events = ev
	var lim *SRQLimitError
	if err := r.SetLimit(17); !errors.As(err, &lim) {
		t.Fatalf("a limit of 17 on an SRQ of 16: %v, want SRQLimitError", err)
	}
	postSRQ(t, r, 1, 10)
	if err := r.SetLimit(5); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		take      int
		events    int
		limitLeft int
	}{
		{5, 0, 5}, // 5 left: not fewer than 5
		{1, 1, 0}, // 4 left: the event, disarmed
		{3, 1, 0}, // 1 left: no second event
	}
	for i, s := range steps {
		popSRQ(t, r, s.take)
		if got := len(ev.list()); got != s.events {
			t.Fatalf("step %d: %d events, want %d", i, got, s.events)
		}
		if got := r.Limit(); got != s.limitLeft {
			t.Fatalf("step %d: limit %d, want %d", i, got, s.limitLeft)
		}
	}
	if err := r.SetLimit(3); err != nil {
		t.Fatal(err)
	}
	popSRQ(t, r, 1) // 0 left, below 3: immediately
	if got := ev.list(); !slices.Equal(got, []abi.EventType{abi.EventSRQLimit, abi.EventSRQLimit}) {
		t.Fatalf("events %v, want two SRQ_LIMIT_REACHED", got)
	}
}

// TestSRQResizeKeepsRequests: the requests posted and not yet taken come
// out of the resized ring in order, none lost or repeated, whether it
// grows or shrinks and wherever the indices stand; a size below them, or
// below the armed limit, is refused and changes nothing; the footprint
// returned is the old ring's.
func TestSRQResizeKeepsRequests(t *testing.T) {
	for _, tc := range []struct {
		name                string
		from, posted, taken int
		to, limit           int
		wantEntries         int
		wantErr             any
	}{
		{"grow", 8, 6, 0, 100, -1, 128, nil},
		{"grow after wrapping", 8, 30, 25, 64, -1, 64, nil},
		{"shrink to what is posted", 64, 40, 37, 3, -1, 4, nil},
		{"empty to one", 16, 9, 9, 1, -1, 1, nil},
		{"arm with the resize", 16, 4, 0, 32, 20, 32, nil},
		{"below what is posted", 64, 10, 0, 9, -1, 0, &SRQBelowPendingError{}},
		{"below the limit armed with it", 16, 0, 0, 4, 5, 0, &SRQLimitError{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
			r, err := NewSRQ(a.NewPD(), tc.from, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			next, want := uint64(1), uint64(1)
			for posted := 0; posted < tc.posted; {
				step := min(tc.from, tc.posted-posted)
				postSRQ(t, r, next, step)
				next += uint64(step)
				posted += step
				take := min(step, tc.taken-int(want-1))
				if got := popSRQ(t, r, take); !slices.Equal(got, seq(want, take)) {
					t.Fatalf("took %v, want %v", got, seq(want, take))
				}
				want += uint64(take)
			}
			before := r.Footprint()
			old, fd, err := r.Resize(tc.to, tc.limit)
			if tc.wantErr != nil {
				if err == nil {
					unix.Close(fd)
					t.Fatalf("resize to %d succeeded, want %T", tc.to, tc.wantErr)
				}
				var below *SRQBelowPendingError
				var lim *SRQLimitError
				if !errors.As(err, &below) && !errors.As(err, &lim) {
					t.Fatalf("resize to %d: %v, want %T", tc.to, err, tc.wantErr)
				}
				if r.Footprint() != before || r.Limit() != 0 {
					t.Fatalf("a refused resize changed the SRQ")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(fd)
			if old != before || r.Footprint() != SRQBytes(tc.to, 1) || r.MaxWR() != tc.wantEntries {
				t.Fatalf("old %d (want %d), now %d entries, %d bytes (want %d)", old, before, r.MaxWR(), r.Footprint(), SRQBytes(tc.to, 1))
			}
			if tc.limit >= 0 && r.Limit() != tc.limit {
				t.Fatalf("limit %d after arming %d with the resize", r.Limit(), tc.limit)
			}
			left := tc.posted - tc.taken
			if got := popSRQ(t, r, left); !slices.Equal(got, seq(want, left)) {
				t.Fatalf("after the resize took %v, want %v", got, seq(want, left))
			}
			postSRQ(t, r, next, tc.wantEntries)
			if got := popSRQ(t, r, tc.wantEntries); !slices.Equal(got, seq(next, tc.wantEntries)) {
				t.Fatalf("a full ring after the resize gave %v", got)
			}
		})
	}
}

// TestSRQResizeHostileRing: a producer index the library made impossible
// refuses the resize with abi.ErrCorruptRing and leaves the ring as it was.
func TestSRQResizeHostileRing(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	r, err := NewSRQ(a.NewPD(), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, prod := range []uint32{9, 0xffffffff, 0x80000000} {
		shm.Store32(r.mem, r.ring.Offset+abi.RingProdOff, prod)
		if _, _, err := r.Resize(64, -1); !errors.Is(err, abi.ErrCorruptRing) {
			t.Fatalf("producer %#x: %v, want ErrCorruptRing", prod, err)
		}
		if r.MaxWR() != 8 {
			t.Fatalf("a refused resize changed the ring")
		}
	}
}
