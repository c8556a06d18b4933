package daemon

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// fakeFDs is a process whose open descriptors the test sets.
type fakeFDs struct {
	open   uint64
	counts int
	now    time.Time
}

func (f *fakeFDs) guard(limit uint64) *fdGuard {
	g := newFDGuard(limit)
	g.count = func() (uint64, error) { f.counts++; return f.open, nil }
	g.now = func() time.Time { return f.now }
	return g
}

// TestFDGuardKeepsTheReserve: clients get descriptors up to the limit less
// the reserve, with an error that says so; freed ones are seen at the next
// count.
func TestFDGuardKeepsTheReserve(t *testing.T) {
	f := &fakeFDs{open: 100, now: time.Unix(1000, 0)}
	g := f.guard(1024)
	budget := g.budget()
	if budget != 1024-64 {
		t.Fatalf("budget %d of 1024", budget)
	}
	n := uint64(0)
	for g.admit(3) == nil {
		n += 3
		f.open += 3
		if n > budget {
			t.Fatal("admitted past the budget")
		}
	}
	if f.open > budget || f.open+3 <= budget {
		t.Fatalf("stopped at %d open, budget %d", f.open, budget)
	}
	err := g.admit(3)
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code != proto.CodeLimit || !strings.Contains(pe.Message, "RLIMIT_NOFILE") || !strings.Contains(pe.Message, "reserve") {
		t.Fatalf("refusal: %v", err)
	}
	// Clients close: the next count (near the limit, soon) sees it.
	f.open -= 300
	f.now = f.now.Add(fdRecountNear)
	if err := g.admit(3); err != nil {
		t.Fatalf("after 300 were closed: %v", err)
	}
}

// TestFDGuardCountsRarely: away from the limit the guard counts once per
// interval, not per admission.
func TestFDGuardCountsRarely(t *testing.T) {
	f := &fakeFDs{open: 10, now: time.Unix(1000, 0)}
	g := f.guard(1 << 20)
	for i := 0; i < 1000; i++ {
		if err := g.admit(1); err != nil {
			t.Fatal(err)
		}
	}
	if f.counts != 1 {
		t.Fatalf("%d counts for 1000 admissions within a second", f.counts)
	}
	f.now = f.now.Add(fdRecount)
	_ = g.admit(1)
	if f.counts != 2 {
		t.Fatalf("%d counts after the interval", f.counts)
	}
}

// TestCountFDs: both ways of counting agree with /proc/self/fd read the
// slow way.
func TestCountFDs(t *testing.T) {
	for name, count := range map[string]func() (uint64, error){"countFDs": countFDs, "listFDs": listFDs} {
		n, err := count()
		if err != nil {
			t.Skip(err)
		}
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip(err)
		}
		// ReadDir's own descriptor is in its list, as the count's is not;
		// other goroutines may open or close some meanwhile.
		if want := uint64(len(ents) - 1); n+2 < want || n > want+2 {
			t.Errorf("%s %d, /proc/self/fd lists %d", name, n, want)
		}
	}
}

// BenchmarkCountFDs counts this process's descriptors with 10,000 open,
// both ways: what a recount costs on a busy daemon (at most once a
// second, or every 20 ms near the limit).
func BenchmarkCountFDs(b *testing.B) {
	for name, count := range map[string]func() (uint64, error){"stat": countFDs, "list": listFDs} {
		b.Run(name, func(b *testing.B) { benchmarkCount(b, count) })
	}
}

func benchmarkCount(b *testing.B, count func() (uint64, error)) {
	var fds []int
	for len(fds) < 10000 {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Skip(err)
		}
		fds = append(fds, fd)
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := count(); err != nil {
			b.Fatal(err)
		}
	}
}
