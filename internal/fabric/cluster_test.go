package fabric

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Three etcd members lose one and the switch keeps working: its data, its
// watches and its election survive on the two that remain (a quorum).
func TestThreeMemberCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three etcd members")
	}
	const n = 3
	names := make([]string, n)
	peers := make([]string, n)
	clients := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("m%d", i)
		var err error
		if peers[i], err = FreeLoopbackURL(); err != nil {
			t.Fatal(err)
		}
		if clients[i], err = FreeLoopbackURL(); err != nil {
			t.Fatal(err)
		}
	}
	cluster, err := InitialCluster(names, peers)
	if err != nil {
		t.Fatal(err)
	}
	members := make([]*Embedded, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			members[i], errs[i] = StartEmbedded(t.TempDir(), EmbedOptions{
				Name: names[i], ClientURL: clients[i], PeerURL: peers[i], Insecure: true, // plaintext on loopback: a test cluster
				InitialCluster: cluster, ClusterToken: "test-" + t.Name(), UnsafeNoFsync: true,
			})
		}()
	}
	wg.Wait()
	for i, m := range members {
		if errs[i] != nil {
			t.Fatalf("member %d: %v", i, errs[i])
		}
		t.Cleanup(func() { m.Close() })
		t.Logf("member %s ready in %v", names[i], m.StartTime.Round(time.Millisecond))
	}

	ctx := ctxT(t)
	st := dialT(t, clients)
	f := setupSwitch(t, st)
	host := testHost()
	sess, err := st.NewSession(ctx, MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := f.RegisterHost(ctx, host, sess); err != nil {
		t.Fatal(err)
	}
	hosts, err := f.WatchHosts(ctx, LivenessOptions{Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wantHost(t, hosts, HostJoined, "h1")
	cand, err := f.Campaign(ctx, sess, "h1", 3, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cand.Close()
	waitRole(t, cand, Leader)

	// Stop the member the client is most likely using (the first), which
	// may also be the raft leader.
	start := time.Now()
	if err := members[0].Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("member %s stopped in %v", names[0], time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if _, err := st.Put(ctx, "/probe", nil, NoLease); err != nil {
		t.Fatal(err)
	}
	t.Logf("first put %v after", time.Since(start).Round(time.Millisecond))
	start = time.Now()

	// Writes go on; the host's lease stays alive; the subnet manager keeps
	// the role and follows new instances; the host watch sees updates.
	if err := f.PutInstance(ctx, testInstance("vm1", 2)); err != nil {
		t.Fatalf("write after losing a member: %v", err)
	}
	t.Logf("first write %v after losing a member", time.Since(start).Round(time.Millisecond))
	waitAssignments(t, f, 3) // vm1's two adapters and h1's default instance's
	host.Addrs = append(host.Addrs, "192.0.2.99")
	if err := f.RegisterHost(ctx, host, sess); err != nil {
		t.Fatal(err)
	}
	wantHost(t, hosts, HostUpdated, "h1")
	if cand.Role() != Leader {
		t.Fatalf("subnet manager lost its role: %v (%v)", cand.Role(), cand.Err())
	}
	select {
	case <-sess.Done():
		t.Fatal("the host's session ended")
	default:
	}
	// A new client that knows only the surviving members works too.
	st2 := dialT(t, clients[1:])
	f2, _ := New(st2, "sw0")
	if li, err := f2.Leader(ctx); err != nil || li.Host != "h1" {
		t.Fatalf("leader seen through the survivors: %+v, %v", li, err)
	}
}
