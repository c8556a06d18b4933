package fabric

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// nextSet reads followed assignment sets until one satisfies cond, and
// returns it as "instance/index" → LID.
func nextSet(t *testing.T, ch <-chan []Assignment, what string, cond func(map[string]uint16) bool) map[string]uint16 {
	t.Helper()
	timeout := time.After(hang)
	var last map[string]uint16
	for {
		select {
		case set, ok := <-ch:
			if !ok {
				t.Fatalf("the assignments' channel closed while waiting until %s", what)
			}
			last = map[string]uint16{}
			for _, a := range set {
				last[fmt.Sprintf("%s/%d", a.Instance, a.Index)] = a.LID()
			}
			if cond(last) {
				return last
			}
		case <-timeout:
			t.Fatalf("waiting until %s: the last set is %v", what, last)
		}
	}
}

// has reports whether set holds exactly the keys named, each with a LID.
func has(keys ...string) func(map[string]uint16) bool {
	return func(set map[string]uint16) bool {
		if len(set) != len(keys) {
			return false
		}
		for _, k := range keys {
			if set[k] == 0 {
				return false
			}
		}
		return true
	}
}

// uniqueLIDs fails the test if two adapters of set share a LID.
func uniqueLIDs(t *testing.T, set map[string]uint16) {
	t.Helper()
	seen := map[uint16]string{}
	for k, lid := range set {
		if other, dup := seen[lid]; dup {
			t.Errorf("LID %#x is both %s's and %s's", lid, other, k)
		}
		seen[lid] = k
	}
}

// testLIDs: the subnet manager gives every adapter — the instances' and
// every host's default instance's — a unicast LID unique on the switch;
// FollowAssignments reports them as they change; a host's default keeps
// its LID while the host is away and across a change of subnet manager.
func testLIDs(t *testing.T, e storeEnv) {
	ctx := ctxT(t)
	f := setupSwitch(t, e.st)
	ch, err := f.FollowAssignments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextSet(t, ch, "the first, empty set", has())

	sm, _ := f.Store().NewSession(ctx, MinTTL)
	defer sm.Close()
	a, err := f.Campaign(ctx, sm, "a", 5, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	waitRole(t, a, Leader)

	hosts := map[string]Session{}
	for i, name := range []string{"h1", "h2"} {
		h := testHost()
		h.Name, h.Identity.MachineID = name, fmt.Sprint("m", i)
		s, _ := f.Store().NewSession(ctx, MinTTL)
		defer s.Close()
		if err := f.RegisterHost(ctx, h, s); err != nil {
			t.Fatal(err)
		}
		hosts[name] = s
	}
	if err := f.PutInstance(ctx, testInstance("vm1", 2)); err != nil {
		t.Fatal(err)
	}
	set := nextSet(t, ch, "both hosts' defaults and vm1's two adapters have LIDs", has("default@h1/0", "default@h2/0", "vm1/0", "vm1/1"))
	uniqueLIDs(t, set)

	// h2's daemon goes (its record with its lease): its default keeps its
	// LID, and a new subnet manager keeps every one.
	if err := hosts["h2"].Close(); err != nil {
		t.Fatal(err)
	}
	sb, _ := f.Store().NewSession(ctx, MinTTL)
	defer sb.Close()
	b, err := f.Campaign(ctx, sb, "b", 10, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if rc := waitRole(t, b, Leader); rc.Report.Kept != 4 || rc.Report.Assigned+rc.Report.Reassigned+rc.Report.Released != 0 {
		t.Fatalf("the new subnet manager's first pass: %v; want the 4 kept", rc.Report)
	}
	got, err := f.Assignments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, asg := range got {
		k := fmt.Sprintf("%s/%d", asg.Instance, asg.Index)
		if set[k] != asg.LID() {
			lost = append(lost, fmt.Sprintf("%s: %#x, was %#x", k, asg.LID(), set[k]))
		}
	}
	if len(got) != len(set) || len(lost) > 0 {
		sort.Strings(lost)
		t.Errorf("after h2 left and the subnet manager changed: %d assignments (want %d), changed: %s", len(got), len(set), strings.Join(lost, "; "))
	}

	// vm1 goes: its LIDs are released; the hosts' defaults stay.
	if err := f.DeleteInstance(ctx, "vm1"); err != nil {
		t.Fatal(err)
	}
	after := nextSet(t, ch, "vm1's LIDs are released", has("default@h1/0", "default@h2/0"))
	if after["default@h1/0"] != set["default@h1/0"] || after["default@h2/0"] != set["default@h2/0"] {
		t.Errorf("the defaults' LIDs changed: %v, were %v", after, set)
	}
}
