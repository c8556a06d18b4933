package admit

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
)

var (
	srcA = netip.MustParseAddr("192.0.2.1")
	srcB = netip.MustParseAddr("192.0.2.2")
)

func TestGateLimits(t *testing.T) {
	tests := []struct {
		name    string
		lim     Limits
		enter   []netip.Addr // in order
		refused []int        // indexes of enter refused
		cut     []int        // indexes cut by a later one
	}{
		{"under the limits", Limits{PerSource: 2, Total: 4}, []netip.Addr{srcA, srcA, srcB}, nil, nil},
		{"per source", Limits{PerSource: 2, Total: 10}, []netip.Addr{srcA, srcA, srcA, srcB, srcA}, []int{2, 4}, nil},
		{"mapped address is the same source", Limits{PerSource: 1, Total: 10},
			[]netip.Addr{srcA, netip.AddrFrom16(srcA.As16())}, []int{1}, nil},
		{"total cuts the oldest", Limits{PerSource: 10, Total: 3}, []netip.Addr{srcA, srcB, srcA, srcB, srcB}, nil, []int{0, 1}},
		{"a refused one cuts nothing", Limits{PerSource: 1, Total: 2}, []netip.Addr{srcA, srcB, srcA}, []int{2}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGate(tt.lim)
			var cutGot []int
			slots := make([]*Slot, len(tt.enter))
			var refused []int
			for i, src := range tt.enter {
				s, err := g.Enter(src, func() { cutGot = append(cutGot, i) })
				if err != nil {
					var se *SourceFullError
					if !errors.As(err, &se) || !errors.Is(err, ErrSourceFull) || se.Source != src.Unmap() {
						t.Fatalf("Enter %d: %v, want a *SourceFullError for %v", i, err, src)
					}
					refused = append(refused, i)
					continue
				}
				slots[i] = s
			}
			if !equal(refused, tt.refused) || !equal(cutGot, tt.cut) {
				t.Fatalf("refused %v, cut %v; want %v, %v", refused, cutGot, tt.refused, tt.cut)
			}
			for _, i := range tt.cut {
				if !slots[i].Cut() || !errors.Is(slots[i].Err(), ErrCut) {
					t.Fatalf("slot %d: Cut %v, Err %v", i, slots[i].Cut(), slots[i].Err())
				}
			}
			st := g.Stats()
			want := len(tt.enter) - len(tt.refused)
			if st.Admitted != uint64(want) || st.Refused != uint64(len(tt.refused)) || st.Cut != uint64(len(tt.cut)) || st.InFlight != want-len(tt.cut) {
				t.Fatalf("stats %+v", st)
			}
			for _, s := range slots {
				if s != nil {
					s.Leave()
					s.Leave() // twice is harmless
				}
			}
			if st := g.Stats(); st.InFlight != 0 || len(g.bySrc) != 0 || g.head != nil || g.tail != nil {
				t.Fatalf("after every Leave: %+v, %d sources, head %p tail %p", st, len(g.bySrc), g.head, g.tail)
			}
		})
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A slot that left frees its source's and the total's room at once, from
// the middle of the queue too.
func TestGateLeaveFrees(t *testing.T) {
	g := NewGate(Limits{PerSource: 2, Total: 3})
	a1, _ := g.Enter(srcA, nil)
	b1, _ := g.Enter(srcB, nil)
	a2, _ := g.Enter(srcA, nil)
	if _, err := g.Enter(srcA, nil); err == nil {
		t.Fatal("a third handshake from A was let in")
	}
	b1.Leave() // the middle one
	if s, err := g.Enter(srcB, nil); err != nil || a1.Cut() {
		t.Fatalf("Enter after a Leave: %v; A's oldest cut: %v", err, a1.Cut())
	} else {
		s.Leave()
	}
	a1.Leave()
	if s, err := g.Enter(srcA, nil); err != nil {
		t.Fatalf("A after one of its slots left: %v", err)
	} else {
		s.Leave()
	}
	a2.Leave()
	if g.Stats().InFlight != 0 {
		t.Fatal(g.Stats())
	}
}

// Many goroutines entering and leaving at once keep the counts right.
func TestGateConcurrent(t *testing.T) {
	g := NewGate(Limits{PerSource: 3, Total: 8})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := netip.AddrFrom4([4]byte{10, 0, 0, byte(w % 3)})
			for range 500 {
				if s, err := g.Enter(src, func() {}); err == nil {
					s.Leave()
				}
			}
		}()
	}
	wg.Wait()
	st := g.Stats()
	if st.InFlight != 0 || st.Admitted+st.Refused != 8*500 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNegativeLimits(t *testing.T) {
	if err := (Limits{PerSource: -1}).Check(); err == nil {
		t.Fatal("negative PerSource accepted")
	}
	if l := NewGate(Limits{Total: -1}).Limits(); l.Total != DefaultTotal || l.PerSource != DefaultPerSource {
		t.Fatalf("limits %+v", l)
	}
}

func TestSourceOf(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 9}, "10.1.2.3"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 9}, "10.1.2.3"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 9, Zone: "eth0"}, "fe80::1"},
		{&net.UnixAddr{Name: "x"}, "invalid IP"},
		{nil, "invalid IP"},
	}
	for _, tt := range tests {
		if got := SourceOf(tt.addr).String(); got != tt.want {
			t.Errorf("SourceOf(%v) = %s, want %s", tt.addr, got, tt.want)
		}
	}
}

// When all are in flight, a handshake that received nothing is cut before
// an older one that did.
func TestGateCutsIdleFirst(t *testing.T) {
	g := NewGate(Limits{PerSource: 10, Total: 3})
	var cut []int
	slots := make([]*Slot, 5)
	for i := range 3 {
		slots[i], _ = g.Enter(srcA, func() { cut = append(cut, i) })
	}
	slots[0].Progress() // the oldest is talking
	slots[2].Progress()
	slots[3], _ = g.Enter(srcB, func() { cut = append(cut, 3) }) // cuts 1, silent
	slots[4], _ = g.Enter(srcB, func() { cut = append(cut, 4) }) // cuts 3, silent
	if !equal(cut, []int{1, 3}) {
		t.Fatalf("cut %v, want the silent ones: [1 3]", cut)
	}
	slots[4].Progress()
	s, _ := g.Enter(srcB, func() {}) // all talking: the oldest goes
	if !equal(cut, []int{1, 3, 0}) {
		t.Fatalf("cut %v, want [1 3 0]", cut)
	}
	s.Leave()
}

// WatchConn marks progress on the first bytes read, not before.
func TestWatchConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	g := NewGate(Limits{})
	s, _ := g.Enter(srcA, nil)
	w := WatchConn(a, s)
	if s.progressed.Load() {
		t.Fatal("progress before any read")
	}
	go func() { _, _ = b.Write([]byte("x")) }()
	if _, err := w.Read(make([]byte, 1)); err != nil || !s.progressed.Load() {
		t.Fatalf("read: %v; progress %v", err, s.progressed.Load())
	}
}
