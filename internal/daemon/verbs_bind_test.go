package daemon_test

import (
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
)

// TestInstanceOnVerbsUplink: `vm create NAME --uplink LINK` binds the
// instance's adapters to the verbs link's device: their GID table is the
// device port's (what ibv_query_gid reports and sgid_index names), and a
// link that is not a verbs link, or none, is refused saying how to make
// one.
func TestInstanceOnVerbsUplink(t *testing.T) {
	cfg := linkConfig(t)
	cfg.VerbsHelper = fakeVerbsHelper(t, "rxe")
	d := startDaemon(t, cfg)
	c := admin(t, cfg.SocketPath)
	c.ok(proto.OpLinkAdd, proto.LinkSpec{Name: "hca0", Type: "verbs", Dev: "rxe0"}, nil)

	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm1", Adapters: 2, Uplink: "hca0"}, nil)
	links, gids := d.InstanceUplinks("vm1")
	if len(links) != 2 || links[0] != "hca0" || links[1] != "hca0" {
		t.Fatalf("the adapters are bound to %q, want hca0 both", links)
	}
	for i, g := range gids {
		if len(g) != len(fakeRxePort.GIDs) || g[0] != fakeRxePort.GIDs[0].GID || g[1] != fakeRxePort.GIDs[1].GID {
			t.Fatalf("adapter %d's GIDs are %x, want the device port's", i, g)
		}
	}
	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm2", Adapters: 1}, nil)
	if links, _ := d.InstanceUplinks("vm2"); len(links) != 1 || links[0] != "" {
		t.Fatalf("an instance without --uplink is bound to %q", links)
	}
	c.fails(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm3", Adapters: 1, Uplink: "hca9"}, proto.CodeNotFound, "no verbs link hca9: `vrdma link add hca9 type verbs dev IBDEV` makes one")
	if d.InstanceUsage("vm3") != nil {
		t.Fatal("a refused instance exists")
	}

	// Saved and restored after its link, bound again.
	c.Close()
	d.Close()
	d = startDaemon(t, cfg)
	if links, gids := d.InstanceUplinks("vm1"); len(links) != 2 || links[0] != "hca0" || len(gids[0]) != 2 || gids[0][1] != fakeRxePort.GIDs[1].GID {
		t.Fatalf("after a restart vm1's adapters are bound to %q (GIDs %x)", links, gids)
	}
}
