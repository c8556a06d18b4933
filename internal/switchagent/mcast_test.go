package switchagent

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/proto"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type noEvents struct{}

func (noEvents) Event(abi.EventType, uint32, uint32, string) {}

// udQP makes a UD QP of tenant scope on h's engine.
func udQP(t *testing.T, h *fakeHost, scope string) *engine.QP {
	t.Helper()
	a := engine.NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, byte(len(scope))}, false)
	h.eng.AddAdapter(a)
	cq, err := engine.NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	q, err := engine.NewQP(engine.QPConfig{PD: a.NewPD(), Type: abi.QPTypeUD, SendCQ: cq, RecvCQ: cq, Events: noEvents{}, Scope: scope,
		Caps: proto.QPCaps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// groupsOf lists the switch's group records as "host tenant group qps".
func groupsOf(t *testing.T, a *Agent) []fabric.McastGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := a.Fabric().McastGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

// TestMcastRecords: the switch records a host's multicast groups per
// tenant (docs/design/multicast.md, "The switch's record"): a group
// appears with its first QP and its QP count follows the attachments; it
// goes with the last detachment or the QP's destruction; the records are
// written again under a new lease when the old one ends; and they go
// with the daemon when it leaves the switch.
func TestMcastRecords(t *testing.T) {
	h := newFakeHost(t)
	a, err := New(loopbackConfig(netip.MustParseAddr("127.0.0.1")), Local{HostName: "h1", StateDir: t.TempDir(), Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Join(); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g := netip.MustParseAddr("::ffff:239.1.2.3").As16()
	x1, x2, y := udQP(t, h, "uid 1001"), udQP(t, h, "uid 1001"), udQP(t, h, "uid 1002")
	for _, q := range []*engine.QP{x1, x2, y} {
		if _, err := q.AttachMcast(g); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, w ...fabric.McastGroup) {
		t.Helper()
		waitUntil(t, what, func() bool { return slices.Equal(groupsOf(t, a), w) })
	}
	want("both tenants' groups are recorded",
		fabric.McastGroup{Host: "h1", Tenant: "uid 1001", Group: "239.1.2.3", QPs: 2},
		fabric.McastGroup{Host: "h1", Tenant: "uid 1002", Group: "239.1.2.3", QPs: 1})
	if err := x1.DetachMcast(g); err != nil {
		t.Fatal(err)
	}
	y.Destroy()
	want("uid 1002's group goes with its QP, uid 1001's counts one QP",
		fabric.McastGroup{Host: "h1", Tenant: "uid 1001", Group: "239.1.2.3", QPs: 1})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.regMu.Lock()
	lease := a.sess.Lease()
	a.regMu.Unlock()
	if _, err := a.store.Client().Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the lease loss is noticed", func() bool { return a.Status().LeaseLost == 1 })
	want("the group is recorded again under the new lease",
		fabric.McastGroup{Host: "h1", Tenant: "uid 1001", Group: "239.1.2.3", QPs: 1})

	if err := x2.DetachMcast(g); err != nil {
		t.Fatal(err)
	}
	want("the last detachment removes the record")
	if _, err := x2.AttachMcast(g); err != nil {
		t.Fatal(err)
	}
	want("attached again, recorded again", fabric.McastGroup{Host: "h1", Tenant: "uid 1001", Group: "239.1.2.3", QPs: 1})
}

// TestMcastRecordsGoWithTheHost: a host's group records are under its
// lease: when its daemon stops without a word (the lease orphaned, as in
// a crash) they end with the lease, and another host of the switch sees
// them go.
func TestMcastRecordsGoWithTheHost(t *testing.T) {
	h2 := newFakeHost(t)
	as := pair(t, "", newFakeHost(t), h2)
	q := udQP(t, h2, "uid 1001")
	if _, err := q.AttachMcast(netip.MustParseAddr("ff0e::1").As16()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "host1 sees host2's group", func() bool {
		return slices.Equal(groupsOf(t, as[0]), []fabric.McastGroup{{Host: "host2", Tenant: "uid 1001", Group: "ff0e::1", QPs: 1}})
	})
	as[1].regMu.Lock()
	sess := as[1].sess
	as[1].regMu.Unlock()
	as[1].cancel() // its loops stop: nothing renews or writes again
	sess.Orphan()
	waitUntil(t, "host2's group ends with its lease", func() bool { return len(groupsOf(t, as[0])) == 0 })
}
