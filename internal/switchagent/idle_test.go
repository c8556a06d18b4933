package switchagent

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/fabric"
)

// An idle agent sleeps (docs/design/idle-daemon.md): once its group
// records are written and its candidacy stands, neither the group
// records' writer nor keepCandidacy wakes until something happens — they
// used to look every second — and an event still wakes the writer.
func TestIdleAgentSleeps(t *testing.T) {
	h := newFakeHost(t)
	a := joined(t, "h1", loopbackConfig(netip.MustParseAddr("127.0.0.1")), h)
	g := netip.MustParseAddr("::ffff:239.1.2.4").As16()
	if _, err := udQP(t, h, "uid 1001").AttachMcast(g); err != nil {
		t.Fatal(err)
	}
	want := []fabric.McastGroup{{Host: "h1", Tenant: "uid 1001", Group: "239.1.2.4", QPs: 1}}
	waitUntil(t, "the group is recorded", func() bool { return slices.Equal(groupsOf(t, a), want) })
	waitUntil(t, "the candidacy stands", func() bool { return a.candidacy() != nil })

	syncs, looks := a.mcSyncs.Load(), a.candLooks.Load()
	// Three of the old one-second looks; a sleeping agent makes none.
	time.Sleep(3 * time.Second)
	if got := a.mcSyncs.Load(); got != syncs {
		t.Errorf("the group records' writer woke %d times with nothing to write", got-syncs)
	}
	if got := a.candLooks.Load(); got != looks {
		t.Errorf("keepCandidacy woke %d times with its candidacy standing", got-looks)
	}

	a.McastChanged()
	waitUntil(t, "a change wakes the writer", func() bool { return a.mcSyncs.Load() > syncs })
}
