package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
)

// TestAccessRules: who may attach to, delete and see an instance, and run
// switch-wide administration.
func TestAccessRules(t *testing.T) {
	d := &Daemon{access: accessPolicy{selfUID: 500}}
	d.access.adminGroup.name, d.access.adminGroup.gid, d.access.adminGroup.set = "vrdma-admin", 600, true
	var (
		root    = creds{known: true, uid: 0, gid: 0}
		self    = creds{known: true, uid: 500, gid: 500}
		owner   = creds{known: true, uid: 1000, gid: 1000}
		other   = creds{known: true, uid: 1001, gid: 1000} // same group, another user
		admin   = creds{known: true, uid: 1002, gid: 1002, groups: []uint32{600}}
		unknown = creds{uid: unknownUID, gid: unknownUID}
	)
	vm := &Instance{Name: "vm", Owner: proto.Owner{UID: 1000, GID: 1000}}
	def := &Instance{Name: DefaultInstance, shared: true}
	tests := []struct {
		who                 string
		c                   creds
		attach, delete, see bool // on vm
		admin               bool
	}{
		{"root", root, true, true, true, true},
		{"the daemon's user", self, true, true, true, true},
		{"the owner", owner, true, true, true, false},
		{"another user of the owner's group", other, false, false, false, false},
		{"a member of the admin group", admin, false, false, true, true},
		{"a peer of unknown credentials", unknown, false, false, false, false},
	}
	for _, tt := range tests {
		if got := d.access.mayAttach(tt.c, vm) == nil; got != tt.attach {
			t.Errorf("%s may attach to vm: %v, want %v", tt.who, got, tt.attach)
		}
		if got := d.access.mayDelete(tt.c, vm) == nil; got != tt.delete {
			t.Errorf("%s may delete vm: %v, want %v", tt.who, got, tt.delete)
		}
		if got := d.access.maySee(tt.c, vm); got != tt.see {
			t.Errorf("%s sees vm: %v, want %v", tt.who, got, tt.see)
		}
		if got := d.access.isAdmin(tt.c); got != tt.admin {
			t.Errorf("%s is an administrator: %v, want %v", tt.who, got, tt.admin)
		}
		if d.access.mayAttach(tt.c, def) != nil || !d.access.maySee(tt.c, def) {
			t.Errorf("%s may not use the default instance", tt.who)
		}
	}
	err := d.access.mayAttach(other, vm)
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code != proto.CodePermission || !strings.Contains(pe.Message, `instance "vm" is another owner's`) || strings.Contains(pe.Message, "1000") {
		t.Errorf("refusal: %v (want it to name no owner)", err)
	}
}

// TestOwnerFor: one creates instances for oneself (with any of one's
// groups); for another owner only as root (or the daemon's user).
func TestOwnerFor(t *testing.T) {
	d := &Daemon{access: accessPolicy{selfUID: 0}}
	d.access.adminGroup.gid, d.access.adminGroup.set = 600, true
	user := creds{known: true, uid: 1000, gid: 1000, groups: []uint32{1000, 27}}
	admin := creds{known: true, uid: 1002, gid: 1002, groups: []uint32{600}}
	o := func(uid, gid uint32) *proto.Owner { return &proto.Owner{UID: uid, GID: gid} }
	tests := []struct {
		c     creds
		owner *proto.Owner
		want  proto.Owner
		ok    bool
	}{
		{user, nil, proto.Owner{UID: 1000, GID: 1000}, true},
		{user, o(1000, 27), proto.Owner{UID: 1000, GID: 27}, true},
		{user, o(1000, 600), proto.Owner{}, false}, // a group it is not in
		{user, o(1001, 1000), proto.Owner{}, false},
		{user, o(0, 0), proto.Owner{}, false},
		{admin, o(1001, 1001), proto.Owner{}, false}, // the admin group administers the switch, not tenants

		{creds{known: true}, o(1001, 5), proto.Owner{UID: 1001, GID: 5}, true}, // root
		{creds{uid: unknownUID}, nil, proto.Owner{}, false},
	}
	for i, tt := range tests {
		got, err := d.access.ownerFor(tt.c, proto.InstanceSpec{Name: "x", Owner: tt.owner})
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("case %d: %+v, %v; want %+v, ok %v", i, got, err, tt.want, tt.ok)
		}
		if err != nil && proto.CodeOf(err) != proto.CodePermission {
			t.Errorf("case %d: code %v", i, proto.CodeOf(err))
		}
	}
}

// TestTrustGroupHoldsOneOwner: trust group names are their owner's, so
// another owner's group of the same name is another group; root may mix
// owners (by the group's canonical name), and then the owner's next
// instance is refused with a message that names no one.
func TestTrustGroupHoldsOneOwner(t *testing.T) {
	d := testDaemon(t, nil)
	alice := &session{cred: creds{known: true, uid: 1000, gid: 1000}}
	bob := &session{cred: creds{known: true, uid: 1001, gid: 1001}}
	root := &session{cred: creds{known: true}}
	create := func(by *session, name, group string) error {
		owner, err := d.access.ownerFor(by.cred, proto.InstanceSpec{Name: name})
		if err != nil {
			return err
		}
		_, err = d.insts.create(proto.InstanceSpec{Name: name, Adapters: 1, TrustGroup: group}, owner, by, false, nil)
		return err
	}
	if err := create(alice, "a1", "g"); err != nil {
		t.Fatal(err)
	}
	if err := create(alice, "a2", "g"); err != nil {
		t.Fatalf("the owner's second instance in its group: %v", err)
	}
	if err := create(bob, "b1", "g"); err != nil {
		t.Fatalf("another owner's group of the same name: %v", err)
	}
	a1, b1 := d.insts.lookup("u1000.a1"), d.insts.lookup("u1001.b1")
	if a1 == nil || b1 == nil || a1.TrustGroup != "u1000.g" || b1.TrustGroup != "u1001.g" {
		t.Fatalf("a1 %+v, b1 %+v: want them in u1000.g and u1001.g", a1, b1)
	}
	if a1.Adapters[0].Trusts(b1.Adapters[0]) {
		t.Fatal("bob's instance in his g trusts alice's in hers")
	}
	if err := create(root, "r1", "u1000.g"); err != nil {
		t.Fatalf("root mixing owners: %v", err)
	}
	err := create(alice, "a3", "g")
	if proto.CodeOf(err) != proto.CodePermission || strings.Contains(err.Error(), "r1") || strings.Contains(err.Error(), "uid 0") {
		t.Fatalf("the owner joining a group root mixed: %v (want a refusal that names no one)", err)
	}
	if d.insts.lookup("u1000.a3") != nil {
		t.Fatal("the refused instance exists")
	}
	if n := d.quota.usedBy(1001)[Instances]; n != 1 {
		t.Fatalf("bob holds %d instances, want 1", n)
	}
	if n := d.quota.usedBy(1000)[Instances]; n != 2 {
		t.Fatalf("alice holds %d instances after one refusal, want 2", n)
	}
}

// TestBindingToAVerbsLinkIsAdmins: an instance bound to a verbs link has
// its QPs and regions made on the host's device by the daemon's helper,
// with the daemon's rights; a user may not grant itself that (its own
// programs' access is /dev/infiniband's to decide). Root gets past the
// check (and then hears that the link does not exist).
func TestBindingToAVerbsLinkIsAdmins(t *testing.T) {
	d := testDaemon(t, nil)
	alice := &session{cred: creds{known: true, uid: 1000, gid: 1000}}
	root := &session{cred: creds{known: true}}
	create := func(by *session, name string) error {
		owner, err := d.access.ownerFor(by.cred, proto.InstanceSpec{Name: name})
		if err != nil {
			return err
		}
		_, err = d.insts.create(proto.InstanceSpec{Name: name, Adapters: 1, Uplink: "hca0"}, owner, by, false, nil)
		return err
	}
	err := create(alice, "a1")
	if proto.CodeOf(err) != proto.CodePermission || !strings.Contains(err.Error(), "--uplink") {
		t.Fatalf("a user binding its instance to a verbs link: %v (want a permission error saying who may)", err)
	}
	if d.insts.lookup("u1000.a1") != nil {
		t.Fatal("the refused instance exists")
	}
	if err := create(root, "r1"); proto.CodeOf(err) != proto.CodeNotFound {
		t.Fatalf("root binding to a link that does not exist: %v (want not found)", err)
	}
}
