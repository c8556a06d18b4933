package fabric

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// The same suite runs on MemStore (memstore_test.go) and on a real
// embedded etcd (etcd_test.go): the fake must behave like etcd.

// hang turns a hang into a failure; it is never a performance threshold.
const hang = 30 * time.Second

// storeEnv is one store under test.
type storeEnv struct {
	st Store
	// other returns a second client of the same store (another connection
	// for etcd).
	other func(t *testing.T) Store
	// advance lets d pass for the store's leases (a FakeClock's Advance,
	// or nothing for etcd, whose time passes by itself).
	advance func(d time.Duration)
	// clock is the clock to give timers that advance drives.
	clock Clock
	// fake: time is a FakeClock (tests may wait for timers to be armed).
	fake *FakeClock
}

// timers waits until exactly n timers are pending on a fake clock — so a
// goroutine has armed (or stopped) its timer before the test advances the
// clock (nothing to wait for on a real clock).
func (e storeEnv) timers(t *testing.T, n int) {
	t.Helper()
	if e.fake == nil {
		return
	}
	deadline := time.Now().Add(hang)
	for e.fake.Pending() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers pending, want %d", e.fake.Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, st Store, key, val string, lease LeaseID) int64 {
	t.Helper()
	rev, err := st.Put(ctxT(t), key, []byte(val), lease)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return rev
}

// next receives one watch response, failing on a hang or a closed channel.
func next(t *testing.T, ch <-chan WatchResponse) WatchResponse {
	t.Helper()
	select {
	case wr, ok := <-ch:
		if !ok {
			t.Fatal("watch closed")
		}
		return wr
	case <-time.After(hang):
		t.Fatal("no watch response")
	}
	return WatchResponse{}
}

func runStoreSuite(t *testing.T, open func(t *testing.T) storeEnv) {
	t.Run("CRUD", func(t *testing.T) { testCRUD(t, open(t)) })
	t.Run("Txn", func(t *testing.T) { testTxn(t, open(t)) })
	t.Run("WatchOrder", func(t *testing.T) { testWatchOrder(t, open(t)) })
	t.Run("SessionRevoke", func(t *testing.T) { testSessionRevoke(t, open(t)) })
	t.Run("LeaseExpiry", func(t *testing.T) { testLeaseExpiry(t, open(t)) })
	t.Run("Election", func(t *testing.T) { testElection(t, open(t)) })
	t.Run("ResignLostCampaign", func(t *testing.T) { testResignLostCampaign(t, open(t)) })
	t.Run("Candidacy", func(t *testing.T) { testCandidacy(t, open(t)) })
	t.Run("HostLiveness", func(t *testing.T) { testHostLiveness(t, open(t)) })
	t.Run("LIDs", func(t *testing.T) { testLIDs(t, open(t)) })
}

func testCRUD(t *testing.T, e storeEnv) {
	st, ctx := e.st, ctxT(t)
	if _, err := st.Get(ctx, "/t/a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	r1 := mustPut(t, st, "/t/b", "1", NoLease)
	r2 := mustPut(t, st, "/t/a", "2", NoLease)
	r3 := mustPut(t, st, "/t/b", "3", NoLease)
	mustPut(t, st, "/u/x", "other prefix", NoLease)
	if !(r1 < r2 && r2 < r3) {
		t.Fatalf("revisions %d %d %d do not increase", r1, r2, r3)
	}
	kv, err := st.Get(ctx, "/t/b")
	if err != nil || string(kv.Value) != "3" || kv.CreateRev != r1 || kv.ModRev != r3 {
		t.Fatalf("get /t/b = %+v, %v; want value 3 created %d modified %d", kv, err, r1, r3)
	}
	kvs, rev, err := st.List(ctx, "/t/")
	if err != nil || len(kvs) != 2 || kvs[0].Key != "/t/a" || kvs[1].Key != "/t/b" || rev < r3 {
		t.Fatalf("list = %+v at %d, %v", kvs, rev, err)
	}
	if _, err := st.Delete(ctx, "/t/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Delete(ctx, "/t/a"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if kvs, _, _ := st.List(ctx, "/t/"); len(kvs) != 1 {
		t.Fatalf("after delete: %+v", kvs)
	}
	o := e.other(t)
	if kv, err := o.Get(ctx, "/t/b"); err != nil || string(kv.Value) != "3" {
		t.Fatalf("second client reads %+v, %v", kv, err)
	}
}

func testTxn(t *testing.T, e storeEnv) {
	st, ctx := e.st, ctxT(t)
	for i, tc := range []struct {
		conds []Cond
		want  error
	}{
		{[]Cond{Absent("/t/k")}, nil},
		{[]Cond{Absent("/t/k")}, ErrConflict},
		{[]Cond{Unchanged("/t/k", 1<<40)}, ErrConflict},
	} {
		_, err := st.Txn(ctx, tc.conds, []Op{PutOp("/t/k", []byte(fmt.Sprint(i)), NoLease), PutOp("/t/k2", []byte("x"), NoLease)})
		if !errors.Is(err, tc.want) && err != tc.want {
			t.Fatalf("txn %d: %v, want %v", i, err, tc.want)
		}
	}
	kv, _ := st.Get(ctx, "/t/k")
	if string(kv.Value) != "0" {
		t.Fatalf("failed transactions wrote: %q", kv.Value)
	}
	rev, err := st.Txn(ctx, []Cond{Unchanged("/t/k", kv.ModRev), {Key: "/t/k", Target: CmpCreate, Rev: kv.CreateRev}},
		[]Op{PutOp("/t/k", []byte("cas"), NoLease), DeleteOp("/t/k2")})
	if err != nil {
		t.Fatalf("compare-and-set: %v", err)
	}
	kv2, _ := st.Get(ctx, "/t/k")
	if string(kv2.Value) != "cas" || kv2.ModRev != rev || kv2.CreateRev != kv.CreateRev {
		t.Fatalf("after CAS: %+v (rev %d)", kv2, rev)
	}
	if _, err := st.Get(ctx, "/t/k2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete in txn: %v", err)
	}
}

func testWatchOrder(t *testing.T, e storeEnv) {
	st, ctx := e.st, ctxT(t)
	base := mustPut(t, st, "/w/a", "1", NoLease)
	mustPut(t, st, "/x/ignored", "1", NoLease)
	mustPut(t, st, "/w/b", "2", NoLease)
	if _, err := st.Txn(ctx, nil, []Op{PutOp("/w/a", []byte("3"), NoLease), PutOp("/w/c", []byte("4"), NoLease)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Delete(ctx, "/w/b"); err != nil {
		t.Fatal(err)
	}
	type ev struct {
		typ      EventType
		key, val string
		prev     string
	}
	want := [][]ev{
		{{EventPut, "/w/a", "1", ""}},
		{{EventPut, "/w/b", "2", ""}},
		{{EventPut, "/w/a", "3", "1"}, {EventPut, "/w/c", "4", ""}},
		{{EventDelete, "/w/b", "", "2"}},
		{{EventPut, "/w/d", "live", ""}},
	}
	// From a past revision: the history, then what happens after.
	ch := st.Watch(ctx, "/w/", base)
	var last int64
	for i, batch := range want {
		if i == len(want)-1 {
			mustPut(t, e.other(t), "/w/d", "live", NoLease)
		}
		wr := next(t, ch)
		if wr.Err != nil || wr.Rev <= last || len(wr.Events) != len(batch) {
			t.Fatalf("response %d: %+v (after rev %d), want %d events", i, wr, last, len(batch))
		}
		last = wr.Rev
		for j, w := range batch {
			g := wr.Events[j]
			if g.Type != w.typ || g.KV.Key != w.key || string(g.KV.Value) != w.val || g.KV.ModRev != wr.Rev {
				t.Errorf("response %d event %d: %v %s=%q rev %d; want %v %s=%q", i, j, g.Type, g.KV.Key, g.KV.Value, g.KV.ModRev, w.typ, w.key, w.val)
			}
			if w.prev != "" && string(g.Prev) != w.prev {
				t.Errorf("response %d event %d: prev %q, want %q", i, j, g.Prev, w.prev)
			}
		}
	}
	// From now (0): only what follows.
	ch2 := st.Watch(ctx, "/w/", 0)
	time.Sleep(10 * time.Millisecond) // not a threshold: lets the watch register before the put
	r := mustPut(t, st, "/w/e", "5", NoLease)
	for {
		wr := next(t, ch2)
		if wr.Rev < r {
			t.Fatalf("watch from now delivered old revision %d", wr.Rev)
		}
		if wr.Rev == r && wr.Events[0].KV.Key == "/w/e" {
			break
		}
	}
}

func testSessionRevoke(t *testing.T, e storeEnv) {
	st, ctx := e.st, ctxT(t)
	s, err := st.NewSession(ctx, MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	if s.TTL() < MinTTL || s.Lease() == NoLease {
		t.Fatalf("session TTL %v lease %x", s.TTL(), s.Lease())
	}
	mustPut(t, st, "/s/a", "x", s.Lease())
	kv, _ := st.Get(ctx, "/s/a")
	if kv.Lease != s.Lease() {
		t.Fatalf("key lease %x, want %x", kv.Lease, s.Lease())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if _, err := st.Get(ctx, "/s/a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("key of a revoked lease: %v", err)
	}
	if _, err := st.Put(ctx, "/s/b", []byte("x"), s.Lease()); !errors.Is(err, ErrSessionLost) {
		t.Fatalf("put under a revoked lease: %v, want ErrSessionLost", err)
	}
}

func testLeaseExpiry(t *testing.T, e storeEnv) {
	st, ctx := e.st, ctxT(t)
	s, err := st.NewSession(ctx, MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	rev := mustPut(t, st, "/l/a", "x", s.Lease())
	ch := st.Watch(ctx, "/l/", rev+1)
	start := time.Now()
	s.Orphan() // the keepalive stops, as when the daemon dies
	select {
	case <-s.Done():
	case <-time.After(hang):
		t.Fatal("orphaned session not done")
	}
	e.advance(s.TTL() - time.Second)
	if _, err := st.Get(ctx, "/l/a"); err != nil {
		t.Fatalf("key gone before its TTL: %v", err)
	}
	e.advance(time.Second)
	wr := next(t, ch)
	if len(wr.Events) != 1 || wr.Events[0].Type != EventDelete || wr.Events[0].KV.Key != "/l/a" {
		t.Fatalf("after expiry: %+v", wr)
	}
	t.Logf("lease of TTL %v expired %v after its keepalive stopped", s.TTL(), time.Since(start).Round(time.Millisecond))
}

func testElection(t *testing.T, e storeEnv) {
	st, ctx := e.st, ctxT(t)
	o := e.other(t)
	s1, err := st.NewSession(ctx, MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := o.NewSession(ctx, MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	e1 := st.NewElection(s1, "/el")
	e2 := o.NewElection(s2, "/el")
	if err := e1.Campaign(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	won := make(chan error, 1)
	go func() { won <- e2.Campaign(ctx, "two") }()
	// e2 must not win while e1 leads: check e1's fence still holds.
	if _, err := st.Txn(ctx, []Cond{{Key: e1.Key(), Target: CmpCreate, Rev: e1.Rev()}}, []Op{PutOp("/el-data", []byte("by one"), NoLease)}); err != nil {
		t.Fatalf("leader's fenced write: %v", err)
	}
	select {
	case err := <-won:
		t.Fatalf("second candidate won while the first leads: %v", err)
	default:
	}
	key1, rev1 := e1.Key(), e1.Rev()
	if err := e1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hang):
		t.Fatal("second candidate did not win after the first resigned")
	}
	if _, err := st.Txn(ctx, []Cond{{Key: key1, Target: CmpCreate, Rev: rev1}}, []Op{PutOp("/el-data", []byte("stale"), NoLease)}); !errors.Is(err, ErrConflict) {
		t.Fatalf("resigned leader's fenced write: %v, want ErrConflict", err)
	}
	// A campaign whose ctx ends withdraws its key.
	s3, err := st.NewSession(ctx, MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	e3 := st.NewElection(s3, "/el")
	if err := e3.Campaign(cctx, "three"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("campaign with an ended ctx: %v", err)
	}
	kvs, _, _ := st.List(ctx, "/el/")
	if len(kvs) != 1 || string(kvs[0].Value) != "two" {
		t.Fatalf("election keys after a withdrawn campaign: %+v", kvs)
	}
}

// testResignLostCampaign: a campaign whose put landed but whose reply was
// lost (its ctx ended in flight, as etcd's client reports "context
// canceled" for a request the cluster applied) leaves a key the election
// never learnt of. Resign must withdraw it all the same: left behind, it
// would lead the election while its candidate stands by, with nobody
// running the subnet manager until the session ends.
func testResignLostCampaign(t *testing.T, e storeEnv) {
	st, ctx := e.st, ctxT(t)
	s, err := st.NewSession(ctx, MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := fmt.Sprintf("/el/%x", int64(s.Lease()))
	mustPut(t, st, key, "lost", s.Lease()) // the campaign's put
	if err := st.NewElection(s, "/el").Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if kvs, _, err := st.List(ctx, "/el/"); err != nil || len(kvs) != 0 {
		t.Fatalf("election keys after Resign: %+v, %v; want none", kvs, err)
	}
	// That is the key a campaign of the session puts.
	el := st.NewElection(s, "/el")
	if err := el.Campaign(ctx, "won"); err != nil || el.Key() != key {
		t.Fatalf("campaign: key %q, %v; want %q", el.Key(), err, key)
	}
}
