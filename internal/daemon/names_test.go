package daemon

import (
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
)

// TestNames: canonical names, what a peer's name means to it, and how a
// canonical name is shown to each viewer.
func TestNames(t *testing.T) {
	root := creds{known: true}
	alice := creds{known: true, uid: 1000, gid: 1000}
	tests := []struct {
		c                creds
		name, canon, err string // canon: lookupName's; err: a part of its refusal
	}{
		{alice, "", DefaultInstance, ""},
		{alice, "default", DefaultInstance, ""},
		{alice, "db1", "u1000.db1", ""},
		{alice, "u1000.db1", "u1000.db1", ""},
		{alice, "u1001.db1", "u1001.db1", ""}, // a canonical name is everyone's (maySee decides)
		{root, "db1", "db1", ""},
		{root, "u1000.db1", "u1000.db1", ""},
		{alice, strings.Repeat("x", 60000), "", "(60000 bytes)"},
		{alice, "a/b", "", "use 1-63 letters"},
		{alice, "-x", "", "starting with a letter or digit"},
	}
	for _, tt := range tests {
		got, err := lookupName(tt.c, tt.name)
		if tt.err != "" {
			if proto.CodeOf(err) != proto.CodeInvalid || !strings.Contains(err.Error(), tt.err) || len(err.Error()) > 300 {
				t.Errorf("lookupName(%d, %.20q): %v, want a short CodeInvalid refusal with %q", tt.c.uid, tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.canon {
			t.Errorf("lookupName(%d, %q) = %q, %v; want %q", tt.c.uid, tt.name, got, err, tt.canon)
		}
	}
	for _, tt := range []struct {
		viewer      creds
		canon, want string
	}{
		{alice, "u1000.db1", "db1"},
		{alice, "u10000.db1", "u10000.db1"},
		{root, "u1000.db1", "u1000.db1"},
		{root, "db1", "db1"},
		{creds{}, "u1000.db1", "u1000.db1"},
	} {
		if got := shownName(tt.viewer, tt.canon); got != tt.want {
			t.Errorf("shownName(%d, %q) = %q, want %q", tt.viewer.uid, tt.canon, got, tt.want)
		}
	}
	for _, tt := range []struct {
		kind  string
		owner uint32
		name  string
		want  string // "" = refused
	}{
		{"instance", 1000, "db1", "u1000.db1"},
		{"instance", 0, "db1", "db1"},
		{"instance", 0, "u1000.db1", ""}, // a tenant's namespace is not root's
		{"trust group", 0, "u1000.g", "u1000.g"},
		{"instance", 1000, "u1000.db1", "u1000.db1"},
		{"instance", 1000, "u1001.db1", ""},  // another's namespace
		{"trust group", 1000, "u1001.g", ""}, // likewise
		{"instance", 1000, "u1000x.db1", "u1000.u1000x.db1"},
		{"instance", 4000000000, strings.Repeat("x", 60), ""}, // too long with the prefix
		{"instance", 1000, strings.Repeat("x", 57), "u1000." + strings.Repeat("x", 57)},
	} {
		got, err := canonicalName(tt.kind, tt.owner, tt.name)
		if tt.want == "" {
			if proto.CodeOf(err) != proto.CodeInvalid {
				t.Errorf("canonicalName(%s, %d, %q): %q, %v; want a refusal", tt.kind, tt.owner, tt.name, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("canonicalName(%s, %d, %q) = %q, %v; want %q", tt.kind, tt.owner, tt.name, got, err, tt.want)
		}
	}
}

// TestRefusalsRevealNothing: tenant B asking for tenant A's instance (by
// the name A uses, and by its canonical name) gets, to attach and to
// delete, exactly what it gets for an instance that does not exist:
// CodeNotFound, the same words, no owner.
func TestRefusalsRevealNothing(t *testing.T) {
	d := testDaemon(t, nil)
	a := &session{d: d, cred: creds{known: true, uid: 60001, gid: 60001}}
	b := &session{d: d, cred: creds{known: true, uid: 60002, gid: 60002}}
	if _, err := d.insts.create(proto.InstanceSpec{Name: "vm", Adapters: 1}, proto.Owner{UID: 60001, GID: 60001}, a, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vm", "u60001.vm"} {
		_, theirs := d.insts.attach(b, name, "")
		_, none := d.insts.attach(b, strings.Replace(name, "vm", "nx", 1), "")
		same := func(what string, theirs, none error) {
			t.Helper()
			msg := func(err error) string { return strings.Replace(err.Error(), "nx", "vm", 1) }
			if theirs == nil || none == nil || proto.CodeOf(theirs) != proto.CodeNotFound || proto.CodeOf(none) != proto.CodeNotFound || msg(theirs) != msg(none) {
				t.Errorf("%s %q: another's: %v; none: %v; want the same CodeNotFound refusal", what, name, theirs, none)
			}
			if theirs != nil && strings.Contains(theirs.Error(), "60001") && name == "vm" {
				t.Errorf("%s %q: the refusal names the owner: %v", what, name, theirs)
			}
		}
		same("attach", theirs, none)
		_, theirs = d.insts.delete(name, b)
		_, none = d.insts.delete(strings.Replace(name, "vm", "nx", 1), b)
		same("delete", theirs, none)
	}
	if d.insts.lookup("u60001.vm") == nil {
		t.Fatal("A's instance is gone")
	}
}

// TestNamesCannotBeSquatted: B creating "db1" first neither blocks A's
// "db1" nor becomes it: each attaches to its own, they do not trust each
// other, and root tells them apart.
func TestNamesCannotBeSquatted(t *testing.T) {
	d := testDaemon(t, nil)
	a := &session{d: d, cred: creds{known: true, uid: 60001, gid: 60001}}
	b := &session{d: d, cred: creds{known: true, uid: 60002, gid: 60002}}
	root := &session{d: d, cred: creds{known: true}}
	create := func(s *session) *Instance {
		t.Helper()
		inst, err := d.insts.create(proto.InstanceSpec{Name: "db1", Adapters: 1, TrustGroup: "g"}, proto.Owner{UID: s.cred.uid, GID: s.cred.gid}, s, false, nil)
		if err != nil {
			t.Fatalf("uid %d creating db1: %v", s.cred.uid, err)
		}
		return inst
	}
	bs := create(b)
	as := create(a)
	if got, err := d.insts.attach(a, "db1", "vrdma0"); err != nil || got != as {
		t.Fatalf("A attaching to db1: %v, %v; want its own", got, err)
	}
	if got, err := d.insts.attach(b, "db1", "vrdma0"); err != nil || got != bs {
		t.Fatalf("B attaching to db1: %v, %v; want its own", got, err)
	}
	if as.Adapters[0].Trusts(bs.Adapters[0]) {
		t.Fatal("A's db1 trusts B's")
	}
	var names []string
	for _, i := range d.insts.list(root.cred) {
		names = append(names, i.Name)
	}
	if got := strings.Join(names, " "); got != "default u60001.db1 u60002.db1" {
		t.Errorf("root sees %s", got)
	}
	names = nil
	for _, i := range d.insts.list(a.cred) {
		names = append(names, i.Name+"/"+i.TrustGroup)
	}
	if got := strings.Join(names, " "); got != "db1/g default/" {
		t.Errorf("A sees %s, want its db1 in its g, and the default", got)
	}
}
