package fabric

import (
	"context"
	"errors"
	"testing"
)

// TestValidateMcastGroup: a group record names a host, a tenant as the
// daemons name them, a multicast address in canonical form and at least
// one QP; anything else is a *ValidationError naming the field.
func TestValidateMcastGroup(t *testing.T) {
	ok := McastGroup{Host: "a", Tenant: "uid 1000", Group: "239.1.2.3", QPs: 1}
	for _, tc := range []struct {
		name  string
		edit  func(*McastGroup)
		field string
	}{
		{"valid", func(*McastGroup) {}, ""},
		{"IPv6 group", func(g *McastGroup) { g.Group = "ff0e::1" }, ""},
		{"no host", func(g *McastGroup) { g.Host = "" }, "Host"},
		{"host with a slash", func(g *McastGroup) { g.Host = "a/b" }, "Host"},
		{"no tenant", func(g *McastGroup) { g.Tenant = "" }, "Tenant"},
		{"tenant with a slash", func(g *McastGroup) { g.Tenant = "uid 1/2" }, "Tenant"},
		{"tenant with an underscore", func(g *McastGroup) { g.Tenant = "uid_1" }, "Tenant"},
		{"unicast", func(g *McastGroup) { g.Group = "10.0.0.1" }, "Group"},
		{"not an address", func(g *McastGroup) { g.Group = "239.1.2" }, "Group"},
		{"mapped form", func(g *McastGroup) { g.Group = "::ffff:239.1.2.3" }, "Group"},
		{"no QPs", func(g *McastGroup) { g.QPs = 0 }, "QPs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := ok
			tc.edit(&g)
			err := ValidateMcastGroup(g)
			var ve *ValidationError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &ve) || ve.Field != tc.field || !errors.Is(err, ErrInvalid)):
				t.Fatalf("got %v, want a *ValidationError on %s", err, tc.field)
			}
		})
	}
}

// TestMcastGroupsSkipsForeignKeys: McastGroups lists what hosts wrote
// with PutMcastGroup and leaves out a record whose key does not match
// what it says (another host's group written under this host's key).
func TestMcastGroupsSkipsForeignKeys(t *testing.T) {
	ctx := context.Background()
	st := NewMemStore(nil)
	f, err := New(st, "sw")
	if err != nil {
		t.Fatal(err)
	}
	g := McastGroup{Host: "a", Tenant: "uid 1000", Group: "239.1.2.3", QPs: 2}
	if err := f.PutMcastGroup(ctx, g, NoLease); err != nil {
		t.Fatal(err)
	}
	forged := McastGroup{Host: "b", Tenant: "uid 1000", Group: "239.1.2.3", QPs: 1}
	if _, err := st.Put(ctx, f.keys.mcastGroup("a", "uid_1000", "239.9.9.9"), encode(forged), NoLease); err != nil {
		t.Fatal(err)
	}
	gs, err := f.McastGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0] != g {
		t.Fatalf("McastGroups = %+v, want only %+v", gs, g)
	}
	if err := f.DeleteMcastGroup(ctx, "a", "uid 1000", "239.1.2.3"); err != nil {
		t.Fatal(err)
	}
	if gs, _ := f.McastGroups(ctx); len(gs) != 0 {
		t.Fatalf("after the delete: %+v", gs)
	}
}
