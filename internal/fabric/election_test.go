package fabric

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBestCandidate(t *testing.T) {
	for _, tc := range []struct {
		cands []Candidate
		want  string
	}{
		{nil, ""},
		{[]Candidate{{"a", 0}}, "a"},
		{[]Candidate{{"a", 1}, {"b", 9}, {"c", 5}}, "b"},
		{[]Candidate{{"c", 5}, {"b", 5}, {"a", 4}}, "b"}, // equal priority: lower name, like OpenSM's lower GUID
		{[]Candidate{{"z", 15}, {"a", 14}}, "z"},
	} {
		got, _ := bestCandidate(tc.cands)
		if got.Host != tc.want {
			t.Errorf("best of %v = %q, want %q", tc.cands, got.Host, tc.want)
		}
	}
}

// waitRole reads c's changes until it reports role, and returns that change.
func waitRole(t *testing.T, c *Candidacy, role Role) RoleChange {
	t.Helper()
	timeout := time.After(hang)
	for {
		select {
		case ch, ok := <-c.Changes():
			if !ok {
				t.Fatalf("candidacy ended (%v) while waiting for %v", c.Err(), role)
			}
			if ch.Role == role && ch.Err == nil {
				return ch
			}
		case <-timeout:
			t.Fatalf("candidate did not become %v (is %v)", role, c.Role())
		}
	}
}

// waitLeader reads observed leaders until host leads.
func waitLeader(t *testing.T, ch <-chan LeaderInfo, host string) LeaderInfo {
	t.Helper()
	timeout := time.After(hang)
	for {
		select {
		case li, ok := <-ch:
			if !ok {
				t.Fatal("leader observation ended")
			}
			if li.Host == host {
				return li
			}
		case <-timeout:
			t.Fatalf("%s never observed as leader", host)
		}
	}
}

func setupSwitch(t *testing.T, st Store) *Fabric {
	t.Helper()
	ctx := ctxT(t)
	f, err := New(st, "sw0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Init(ctx, Switch{Description: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := f.PutPortGroup(ctx, PortGroup{Name: "pg0", VLAN: 10}); err != nil {
		t.Fatal(err)
	}
	return f
}

func testCandidacy(t *testing.T, e storeEnv) {
	ctx := ctxT(t)
	fa := setupSwitch(t, e.st)
	fb, _ := New(e.other(t), "sw0")
	if err := fa.PutInstance(ctx, testInstance("vm1", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := fa.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("leader before any candidate: %v", err)
	}
	obs, err := fa.ObserveLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if li := <-obs; li.Host != "" {
		t.Fatalf("first observation %+v, want no leader", li)
	}

	// a (priority 5) alone: it leads and assigns both adapters.
	sa, _ := fa.Store().NewSession(ctx, MinTTL)
	defer sa.Close()
	a, err := fa.Campaign(ctx, sa, "a", 5, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if rc := waitRole(t, a, Leader); rc.Report.Assigned != 2 {
		t.Fatalf("a's first pass: %v", rc.Report)
	}
	waitLeader(t, obs, "a")

	// b (priority 10) stands: a yields, b takes over and keeps a's work.
	sb, _ := fb.Store().NewSession(ctx, MinTTL)
	defer sb.Close()
	b, err := fb.Campaign(ctx, sb, "b", 10, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	waitRole(t, a, Standby)
	if rc := waitRole(t, b, Leader); rc.Report.Kept != 2 || rc.Report.Assigned != 0 {
		t.Fatalf("b's re-validation: %v", rc.Report)
	}
	li := waitLeader(t, obs, "b")
	if got, err := fa.Leader(ctx); err != nil || got != li {
		t.Fatalf("Leader() = %+v, %v; observed %+v", got, err, li)
	}

	// The leader follows changes: a new instance gets its assignments.
	if err := fa.PutInstance(ctx, testInstance("vm2", 1)); err != nil {
		t.Fatal(err)
	}
	waitAssignments(t, fa, 3)

	// b dies (its keepalive stops). While nobody leads, someone breaks an
	// assignment; a takes over after b's lease ends and repairs it.
	start := time.Now()
	sb.Orphan()
	asgs, _ := fa.Assignments(ctx)
	bad := asgs[1]
	bad.AdapterID = asgs[0].AdapterID
	if _, err := fa.Store().Put(ctx, fa.keys.assignment(bad.Instance, bad.Index), encode(bad), NoLease); err != nil {
		t.Fatal(err)
	}
	e.advance(sb.TTL())
	rc := waitRole(t, a, Leader)
	takeover := time.Since(start)
	if rc.Report.Kept != 2 || rc.Report.Reassigned != 1 {
		t.Fatalf("a's re-validation after takeover: %v", rc.Report)
	}
	waitLeader(t, obs, "a")
	t.Logf("takeover after the leader's keepalive stopped (TTL %v): %v", sb.TTL(), takeover.Round(time.Millisecond))
	checkAssignments(t, fa)

	// b's candidacy ended with its session.
	select {
	case <-b.Done():
	case <-time.After(hang):
		t.Fatal("b's candidacy did not end with its session")
	}
	if !errors.Is(b.Err(), ErrSessionLost) {
		t.Fatalf("b ended with %v", b.Err())
	}

	// Revoking the leader's lease hands over at once.
	sc, _ := fb.Store().NewSession(ctx, MinTTL)
	defer sc.Close()
	c, err := fb.Campaign(ctx, sc, "c", 1, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start = time.Now()
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}
	waitRole(t, c, Leader)
	t.Logf("takeover after the leader's lease was revoked: %v", time.Since(start).Round(time.Millisecond))

	// Bad priorities are refused.
	if _, err := fa.Campaign(ctx, sc, "d", 16, SMConfig{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("priority 16: %v", err)
	}
}

// waitAssignments polls until the switch holds n assignments.
func waitAssignments(t *testing.T, f *Fabric, n int) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		asgs, err := f.Assignments(ctxT(t))
		if err == nil && len(asgs) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d assignments, want %d (%v)", len(asgs), n, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkAssignments verifies that identifiers and per-host blocks are unique.
func checkAssignments(t *testing.T, f *Fabric) {
	t.Helper()
	asgs, err := f.Assignments(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint32]bool{}
	blocks := map[string]bool{}
	for _, a := range asgs {
		b := a.Host + "/" + string(rune(a.QPNBase>>16))
		if ids[a.AdapterID] || blocks[b] {
			t.Fatalf("conflicting assignments: %+v", asgs)
		}
		ids[a.AdapterID], blocks[b] = true, true
	}
}

// Campaign's ctx ending ends the candidacy without an error.
func TestCandidacyCancel(t *testing.T) {
	m := NewMemStore(nil)
	f := setupSwitch(t, m)
	ctx, cancel := context.WithCancel(ctxT(t))
	s, _ := m.NewSession(ctx, MinTTL)
	c, err := f.Campaign(ctx, s, "a", 0, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	waitRole(t, c, Leader)
	cancel()
	<-c.Done()
	if c.Err() != nil || c.Role() != Standby {
		t.Fatalf("after cancel: %v, %v", c.Role(), c.Err())
	}
	if _, err := f.Leader(ctxT(t)); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("leader after the only candidate withdrew: %v", err)
	}
}
