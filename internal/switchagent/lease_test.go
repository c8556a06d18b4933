package switchagent

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/fabric"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leader reports whether a holds the subnet manager.
func leader(a *Agent) bool {
	c := a.candidacy()
	return c != nil && c.Role() == fabric.Leader
}

// An agent whose lease ends under it (etcd out of reach for longer than
// the TTL, here: revoked) registers its host again and stands again for
// the subnet manager.
func TestLeaseLost(t *testing.T) {
	a := joined(t, "h1", loopbackConfig(netip.MustParseAddr("127.0.0.1")), newFakeHost(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hostUp := func() bool {
		_, err := a.Fabric().Host(ctx, "h1")
		return err == nil
	}
	waitUntil(t, "h1 is registered", hostUp)
	waitUntil(t, "h1 holds the subnet manager", func() bool { return leader(a) })
	a.regMu.Lock()
	lease := a.sess.Lease()
	a.regMu.Unlock()
	if _, err := a.store.Client().Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the lease loss is noticed", func() bool { return a.Status().LeaseLost == 1 })
	waitUntil(t, "h1 is registered again, under a new lease", func() bool {
		a.regMu.Lock()
		now := a.sess.Lease()
		a.regMu.Unlock()
		return now != lease && hostUp()
	})
	waitUntil(t, "h1 holds the subnet manager again", func() bool { return leader(a) })
	if st := a.Status(); st.Role != fabric.Leader.String() {
		t.Errorf("status says the role is %q, want %q", st.Role, fabric.Leader)
	}
}

// A candidacy that ends while the lease lives is started again.
func TestCandidacyEnds(t *testing.T) {
	a := joined(t, "h3", loopbackConfig(netip.MustParseAddr("127.0.0.1")), newFakeHost(t))
	waitUntil(t, "h3 holds the subnet manager", func() bool { return leader(a) })
	old := a.candidacy()
	if err := old.Close(); err != nil { // as if its watch had failed for good
		t.Fatal(err)
	}
	waitUntil(t, "h3 stands again and holds the subnet manager", func() bool {
		return a.candidacy() != old && leader(a)
	})
	if n := a.Status().LeaseLost; n != 0 {
		t.Errorf("the lease was counted lost %d times: the candidacy alone ended", n)
	}
}
