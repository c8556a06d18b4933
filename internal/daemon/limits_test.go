package daemon

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseLimits(t *testing.T) {
	tests := []struct {
		in   string
		want Limits
		err  string // a part of the error; "" = none
	}{
		{"", Limits{}, ""},
		{"  ", Limits{}, ""},
		{"qp=4096", Limits{QPs: 4096}, ""},
		{"qp=4096,cq=10, mr = 7", Limits{QPs: 4096, CQs: 10, MRs: 7}, ""},
		{"qps=3,sessions=2", Limits{QPs: 3, Sessions: 2}, ""},
		{"QP=1", Limits{QPs: 1}, ""},
		{"locked=16G", Limits{Locked: 16 << 30}, ""},
		{"locked=4k,ah=2M", Limits{Locked: 4 << 10, AHs: 2 << 20}, ""},
		{"locked=1T", Limits{Locked: 1 << 40}, ""},
		{"session=unlimited", Limits{Sessions: Unlimited}, ""},
		{"instance=0", Limits{Instances: 0}, ""},
		{"pd=1,srq=2,ah=3,instance=4", Limits{PDs: 1, SRQs: 2, AHs: 3, Instances: 4}, ""},
		{"cmlisten=16,cmconn=1K", Limits{CMListeners: 16, CMConns: 1 << 10}, ""},
		{"ring=1G", Limits{Ring: 1 << 30}, ""},
		{"qp", nil, "write RESOURCE=N"},
		{"=5", nil, "write RESOURCE=N"},
		{"qp=", nil, "not a count"},
		{"qp=-1", nil, "not a count"},
		{"qp=1.5", nil, "not a count"},
		{"qp=K", nil, "not a count"},
		{"qp=1X", nil, "not a count"},
		{"gpu=1", nil, `unknown resource "gpu"`},
		{"qp=1,qp=2", nil, "limited twice"},
		{"qp=1,", nil, "write RESOURCE=N"},
		{"locked=99999999999T", nil, "does not fit"},
		{"qp=18446744073709551616", nil, "not a count"},
	}
	for _, tt := range tests {
		got, err := ParseLimits(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseLimits(%q) = %v, %v; want an error with %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseLimits(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParseLimits: whatever the flag says, parsing never panics, and what
// parses formats back into the same limits.
func FuzzParseLimits(f *testing.F) {
	for _, s := range []string{"qp=4096,cq=4096", "locked=16G", "session=unlimited", "qp=1,qp=2", "mr=3k, ah=7", "=", ",,", "qp=18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLimits(s)
		if err != nil {
			return
		}
		again, err := ParseLimits(l.String())
		if err != nil || !reflect.DeepEqual(again, l) {
			t.Fatalf("%q parsed as %v, formatted as %q, which parses as %v, %v", s, l, l.String(), again, err)
		}
	})
}

// TestDefaultUserLimits: with descriptors to spare the defaults are the
// nominal ones; with few, one uid holding its whole quota of everything
// holds at most a quarter of the daemon's descriptors, plus the floors.
func TestDefaultUserLimits(t *testing.T) {
	if got := defaultUserLimits(1<<20, 8<<30); got[QPs] != nominalUserLimits[QPs] || got[Locked] != 2<<30 || got[Ring] != 512<<20 {
		t.Errorf("a roomy daemon: %v", got)
	}
	for _, budget := range []uint64{20000 - fdReserve(20000), 1024 - fdReserve(1024), 65536, 1 << 20} {
		l := defaultUserLimits(budget, 0)
		var fds uint64
		for r := range numResources {
			fds += l[r] * fdCost[r]
			if l[r] == 0 {
				t.Errorf("budget %d: %v is limited to 0", budget, r)
			}
		}
		floors := uint64(64*fdCost[Sessions] + 16*(fdCost[CQs]+fdCost[QPs]+fdCost[MRs]+fdCost[SRQs]))
		if fds > budget/userShare+floors {
			t.Errorf("budget %d: one uid may hold %d descriptors: %v", budget, fds, l)
		}
		if l[Locked] != Unlimited || l[Ring] != Unlimited {
			t.Errorf("budget %d, memory unknown: locked %d, ring %d, want unlimited", budget, l[Locked], l[Ring])
		}
	}
}

// TestDefaultTotalLimits: all tenants together may lock half of the
// host's memory by default (each uid a quarter) and have an eighth
// allocated for their queues (each uid a sixteenth), and nothing else is
// capped daemon-wide by default beyond the descriptor reserve; a
// configured total is taken as given, not capped at one adapter's maxima.
func TestDefaultTotalLimits(t *testing.T) {
	l := defaultTotalLimits(8 << 30)
	for r := range numResources {
		want := uint64(Unlimited)
		switch Resource(r) {
		case Locked:
			want = 4 << 30
		case Ring:
			want = 1 << 30
		}
		if l[r] != want {
			t.Errorf("default total %v = %d, want %d", Resource(r), l[r], want)
		}
	}
	if l := defaultTotalLimits(0); l[Locked] != Unlimited || l[Ring] != Unlimited {
		t.Errorf("memory unknown: total locked %d, ring %d, want unlimited", l[Locked], l[Ring])
	}
	if l := resolveTotal(defaultTotalLimits(8<<30), Limits{QPs: 1 << 20, Locked: 1 << 30}); l[QPs] != 1<<20 || l[Locked] != 1<<30 {
		t.Errorf("configured totals: %v", l)
	}
}

// TestResolveCapsAtTheDevice: a limit above what an adapter can hold is
// what it can hold; unset resources keep their defaults.
func TestResolveCapsAtTheDevice(t *testing.T) {
	def := defaultUserLimits(1<<20, 0)
	l := resolve(def, Limits{QPs: Unlimited, CQs: 7})
	if l[QPs] != deviceMax[QPs] || l[CQs] != 7 || l[MRs] != def[MRs] || l[Sessions] != def[Sessions] {
		t.Errorf("resolved %v", l)
	}
}
