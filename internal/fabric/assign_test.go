package fabric

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func inst(name, host string, idx ...int) Instance {
	in := Instance{Name: name, Host: host}
	for _, i := range idx {
		in.Adapters = append(in.Adapters, Adapter{Index: i})
	}
	return in
}

func stored(a Assignment) storedAssignment {
	return storedAssignment{ref: adapterRef{a.Instance, a.Index}, a: a, ok: true,
		key: newKeyspace("sw").assignment(a.Instance, a.Index)}
}

func asg(in string, idx int, host string, id, base uint32) Assignment {
	return Assignment{Instance: in, Index: idx, Host: host, AdapterID: id, QPNBase: base, QPNCount: DefaultQPNBlock}
}

func TestPlan(t *testing.T) {
	const B = DefaultQPNBlock
	for _, tc := range []struct {
		desc     string
		insts    []Instance
		hosts    []string // hosts with a record: their default instances
		cur      []Assignment
		cfg      SMConfig
		wantPuts []Assignment
		wantDels int
		want     Report
	}{
		{
			desc:     "fresh switch",
			insts:    []Instance{inst("vm1", "h1", 0, 1), inst("vm2", "h2", 0)},
			wantPuts: []Assignment{asg("vm1", 0, "h1", 1, B), asg("vm1", 1, "h1", 2, 2*B), asg("vm2", 0, "h2", 3, B)},
			want:     Report{Assigned: 3},
		},
		{
			desc:  "all valid: nothing to do",
			insts: []Instance{inst("vm1", "h1", 0)},
			cur:   []Assignment{asg("vm1", 0, "h1", 7, 5*B)},
			want:  Report{Kept: 1},
		},
		{
			desc:     "adapter removed: released",
			insts:    []Instance{inst("vm1", "h1", 0)},
			cur:      []Assignment{asg("vm1", 0, "h1", 1, B), asg("vm1", 1, "h1", 2, 2*B)},
			wantDels: 1,
			want:     Report{Kept: 1, Released: 1},
		},
		{
			desc:     "duplicate id and block: the later one is reassigned",
			insts:    []Instance{inst("vm1", "h1", 0), inst("vm2", "h1", 0)},
			cur:      []Assignment{asg("vm1", 0, "h1", 1, B), asg("vm2", 0, "h1", 1, B)},
			wantPuts: []Assignment{asg("vm2", 0, "h1", 2, 2*B)},
			want:     Report{Kept: 1, Reassigned: 1},
		},
		{
			desc:  "same block on different hosts is fine",
			insts: []Instance{inst("vm1", "h1", 0), inst("vm2", "h2", 0)},
			cur:   []Assignment{asg("vm1", 0, "h1", 1, B), asg("vm2", 0, "h2", 2, B)},
			want:  Report{Kept: 2},
		},
		{
			desc:     "instance moved host: reassigned in the new namespace",
			insts:    []Instance{inst("vm1", "h2", 0), inst("vm2", "h2", 0)},
			cur:      []Assignment{asg("vm1", 0, "h1", 1, B), asg("vm2", 0, "h2", 2, B)},
			wantPuts: []Assignment{asg("vm1", 0, "h2", 1, 2*B)},
			want:     Report{Kept: 1, Reassigned: 1},
		},
		{
			desc:     "malformed blocks are reassigned",
			insts:    []Instance{inst("vm1", "h1", 0, 1, 2)},
			cur:      []Assignment{asg("vm1", 0, "h1", 1, 0), asg("vm1", 1, "h1", 2, B+1), {Instance: "vm1", Index: 2, Host: "h1", AdapterID: 3, QPNBase: B, QPNCount: 1}},
			wantPuts: []Assignment{asg("vm1", 0, "h1", 1, B), asg("vm1", 1, "h1", 2, 2*B), asg("vm1", 2, "h1", 3, 3*B)},
			want:     Report{Reassigned: 3},
		},
		{
			desc:     "every host's default instance gets one",
			insts:    []Instance{inst("vm1", "h1", 0)},
			hosts:    []string{"h1", "h2"},
			wantPuts: []Assignment{asg("default@h1", 0, "h1", 1, B), asg("default@h2", 0, "h2", 2, B), asg("vm1", 0, "h1", 3, 2*B)},
			want:     Report{Assigned: 3},
		},
		{
			desc:  "a host's default instance keeps its assignment while the host has no record",
			insts: []Instance{inst("vm1", "h1", 0)},
			cur:   []Assignment{asg("default@h1", 0, "h1", 1, B), asg("vm1", 0, "h1", 2, 2*B)},
			want:  Report{Kept: 2},
		},
		{
			desc:     "a default instance has one adapter, on the host it names",
			hosts:    []string{"h1"},
			cur:      []Assignment{asg("default@h1", 0, "h1", 1, B), asg("default@h1", 1, "h1", 2, 2*B), asg("default@h2", 0, "h1", 3, 3*B)},
			wantDels: 2,
			want:     Report{Kept: 1, Released: 1},
		},
		{
			desc:     "identifiers above the unicast LIDs are reassigned",
			insts:    []Instance{inst("vm1", "h1", 0, 1)},
			cur:      []Assignment{asg("vm1", 0, "h1", MaxUnicastLID, B), asg("vm1", 1, "h1", MaxUnicastLID+1, 2*B)},
			wantPuts: []Assignment{asg("vm1", 1, "h1", 1, 2*B)},
			want:     Report{Kept: 1, Reassigned: 1},
		},
		{
			desc:     "namespace full",
			insts:    []Instance{inst("vm1", "h1", 0, 1, 2, 3)},
			cfg:      SMConfig{QPNBlock: 1 << 22}, // 3 usable blocks
			wantPuts: []Assignment{{"vm1", 0, "h1", 1, 1 << 22, 1 << 22}, {"vm1", 1, "h1", 2, 2 << 22, 1 << 22}, {"vm1", 2, "h1", 3, 3 << 22, 1 << 22}},
			want:     Report{Assigned: 3, Problems: []string{"x"}},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var cur []storedAssignment
			for _, a := range tc.cur {
				cur = append(cur, stored(a))
			}
			puts, dels, rep := plan(tc.insts, tc.hosts, cur, tc.cfg)
			if !reflect.DeepEqual(puts, tc.wantPuts) {
				t.Errorf("puts\n got %+v\nwant %+v", puts, tc.wantPuts)
			}
			if len(dels) != tc.wantDels {
				t.Errorf("deletes %v, want %d", dels, tc.wantDels)
			}
			if len(rep.Problems) != len(tc.want.Problems) {
				t.Errorf("problems %q", rep.Problems)
			}
			rep.Problems, tc.want.Problems = nil, nil
			if !reflect.DeepEqual(rep, tc.want) {
				t.Errorf("report %+v, want %+v", rep, tc.want)
			}
			// A second pass over the result changes nothing.
			after := map[string]storedAssignment{}
			for _, s := range cur {
				after[s.key] = s
			}
			for _, k := range dels {
				delete(after, k)
			}
			for _, a := range puts {
				s := stored(a)
				after[s.key] = s
			}
			var again []storedAssignment
			for _, s := range after {
				again = append(again, s)
			}
			if p2, d2, _ := plan(tc.insts, tc.hosts, again, tc.cfg); len(p2) != 0 || len(d2) != 0 {
				t.Errorf("second pass not idempotent: puts %+v dels %v", p2, d2)
			}
		})
	}
}

// TestPlanLIDsRunOut: once every unicast LID is held, an adapter more
// gets no identifier (a problem saying so), rather than one that is no
// LID.
func TestPlanLIDsRunOut(t *testing.T) {
	const B = DefaultQPNBlock
	var insts []Instance
	var cur []storedAssignment
	for id := uint32(1); id <= MaxUnicastLID; id++ {
		h := fmt.Sprintf("h%d", id/200) // 200 adapters a host: QPN blocks to spare
		name := fmt.Sprintf("vm%d", id)
		insts = append(insts, inst(name, h, 0))
		cur = append(cur, stored(asg(name, 0, h, id, (id%200+1)*B)))
	}
	insts = append(insts, inst("one-more", "h0", 0))
	puts, dels, rep := plan(insts, nil, cur, SMConfig{})
	if len(puts) != 0 || len(dels) != 0 || rep.Kept != MaxUnicastLID || len(rep.Problems) != 1 {
		t.Fatalf("puts %v, dels %v, report kept %d, problems %q: want the %d kept and one problem", puts, dels, rep.Kept, rep.Problems, MaxUnicastLID)
	}
	if !strings.Contains(rep.Problems[0], "one-more/vrdma0") || !strings.Contains(rep.Problems[0], "unicast LID") {
		t.Errorf("problem %q: want it to name the adapter and the LIDs", rep.Problems[0])
	}
}

func TestAssignmentLID(t *testing.T) {
	for _, tc := range []struct {
		id   uint32
		want uint16
	}{{0, 0}, {1, 1}, {MaxUnicastLID, MaxUnicastLID}, {MaxUnicastLID + 1, 0}, {1 << 20, 0}} {
		if got := (Assignment{AdapterID: tc.id}).LID(); got != tc.want {
			t.Errorf("adapter identifier %#x: LID %#x, want %#x", tc.id, got, tc.want)
		}
	}
}

func TestHostDefaultInstance(t *testing.T) {
	name := HostDefaultInstance("h1")
	if ValidateName("instance", name) == nil {
		t.Errorf("%q is a valid instance name: a user's instance could take it", name)
	}
	if h, ok := hostOfDefault(name); !ok || h != "h1" {
		t.Errorf("hostOfDefault(%q) = %q, %v; want h1", name, h, ok)
	}
	for _, n := range []string{"default", "default@", "vm1", "default@a/b", "xdefault@h1"} {
		if h, ok := hostOfDefault(n); ok {
			t.Errorf("hostOfDefault(%q) = %q: want no host", n, h)
		}
	}
}

func TestSMConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		block uint32
		ok    bool
	}{{0, true}, {0x100, true}, {0x400000, true}, {0x80, false}, {0x800000, false}, {0x10001, false}} {
		if err := (SMConfig{QPNBlock: tc.block}).Validate(); (err == nil) != tc.ok {
			t.Errorf("block %#x: %v", tc.block, err)
		}
	}
}
