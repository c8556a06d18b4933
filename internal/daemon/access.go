package daemon

import (
	"fmt"
	"os/user"
	"strconv"

	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// Who may do what. Anyone who may open the socket may use the default
// instance, create instances of their own and read the switch. An
// instance belongs to its owner (a uid and gid): only the owner or a
// privileged peer (root, or the daemon's own user) may attach to it,
// delete it, put it in a trust group or create it for someone else.
// Switch-wide administration (links, port groups, other hosts' records) is
// for privileged peers and the admin group, which administers the switch
// but owns no tenant's instances.

// who says who may run a command (dispatch.go's table).
type who uint8

const (
	anyone who = iota // every user of the socket
	admins            // privileged peers and the admin group
)

// accessPolicy decides who may do what: who is privileged, who
// administers the switch, who may attach to, delete or see an instance and
// for whom one may be created. It holds what those answers depend on
// beyond the instance asked about: the daemon's own uid and its admin
// group. It never changes once the daemon is made.
type accessPolicy struct {
	selfUID    uint32 // the daemon's own uid: privileged like root
	adminGroup struct {
		name string
		gid  uint32
		set  bool
	}
}

// newAccessPolicy returns the policy of a daemon running as uid self,
// whose admin group is adminGroup (a name or a gid; "": none).
func newAccessPolicy(self uint32, adminGroup string) (accessPolicy, error) {
	a := accessPolicy{selfUID: self}
	if g := adminGroup; g != "" {
		name, gid, err := lookupGroup(g)
		if err != nil {
			return accessPolicy{}, fmt.Errorf("daemon: admin group %q: %w (create it, give its gid, or leave --admin-group out: root and the daemon's user administer)", g, err)
		}
		a.adminGroup.name, a.adminGroup.gid, a.adminGroup.set = name, gid, true
	}
	return a, nil
}

// privileged reports whether c is root or the daemon's own uid (a daemon
// that does not run as root is administered by the user who runs it).
func (a *accessPolicy) privileged(c creds) bool {
	return c.known && (c.uid == 0 || c.uid == a.selfUID)
}

// isAdmin reports whether c may administer the switch: privileged, or a
// member of the daemon's admin group (primary or supplementary).
func (a *accessPolicy) isAdmin(c creds) bool {
	return a.privileged(c) || a.adminGroup.set && c.inGroup(a.adminGroup.gid)
}

// mayRun checks a command's who against the session's peer.
func (s *session) mayRun(op proto.Op, w who) error {
	if w == admins && !s.d.access.isAdmin(s.cred) {
		return proto.Errorf(proto.CodePermission, "%v is switch-wide administration, for root, the daemon's user and %s; %s is none of them: run it with sudo%s",
			op, s.d.access.adminGroupName(), s.cred, s.d.access.adminGroupHint())
	}
	return nil
}

func (a *accessPolicy) adminGroupName() string {
	if a.adminGroup.set {
		return "the admin group " + a.adminGroup.name
	}
	return "an admin group (the daemon has none: --admin-group)"
}

func (a *accessPolicy) adminGroupHint() string {
	if a.adminGroup.set {
		return ", or be made a member of " + a.adminGroup.name
	}
	return ""
}

// owns reports whether c is inst's owner.
func (c creds) owns(inst *Instance) bool { return c.known && c.uid == inst.Owner.UID }

// mayAttach checks that c may attach to inst (a hello naming it): the
// default instance is open to every user of the socket; any other is its
// owner's. The caller has checked that c may see inst (one it may not is
// one that does not exist); the refusal names no owner.
func (a *accessPolicy) mayAttach(c creds, inst *Instance) error {
	if inst.shared || a.privileged(c) || c.owns(inst) {
		return nil
	}
	return proto.Errorf(proto.CodePermission, "instance %s is another owner's and %s may not attach to it: only its owner and root may (unset VRDMA_INSTANCE for the default instance, or create one of your own with `vrdma vm create NAME`)",
		quoteName(shownName(c, inst.Name)), c)
}

// mayDelete checks that c may delete inst: its owner or a privileged peer.
func (a *accessPolicy) mayDelete(c creds, inst *Instance) error {
	if a.privileged(c) || c.owns(inst) {
		return nil
	}
	return proto.Errorf(proto.CodePermission, "instance %s is another owner's and %s may not delete it: only its owner and root may",
		quoteName(shownName(c, inst.Name)), c)
}

// maySee reports whether c may see inst in a listing: its owner,
// administrators, and everyone the default instance.
func (a *accessPolicy) maySee(c creds, inst *Instance) bool {
	return inst.shared || a.isAdmin(c) || c.owns(inst)
}

// maySeeName is maySee for an instance known by its canonical name alone
// (a switch record, which names no owner): the name's namespace is its
// owner's (nameOwner).
func (a *accessPolicy) maySeeName(c creds, name string) bool {
	return name == DefaultInstance || a.isAdmin(c) || c.known && c.uid == nameOwner(name)
}

// ownerFor returns the owner of an instance c asks for: c itself unless
// the spec names another, which only a privileged peer may.
func (a *accessPolicy) ownerFor(c creds, spec proto.InstanceSpec) (proto.Owner, error) {
	if spec.Owner == nil {
		if !c.known {
			return proto.Owner{}, proto.Errorf(proto.CodePermission, "the daemon cannot tell who is asking (no SO_PEERCRED), so the instance would have no owner: create it as root with --owner")
		}
		return proto.Owner{UID: c.uid, GID: c.gid}, nil
	}
	o := *spec.Owner
	if c.known && o.UID == c.uid && c.inGroup(o.GID) {
		return o, nil // one's own, with another of one's groups
	}
	if !a.privileged(c) {
		return proto.Owner{}, proto.Errorf(proto.CodePermission, "instance %s for owner %d:%d: %s may create instances only for itself (uid %d, one of its groups); instances for another owner are root's (and the daemon's user's)",
			quoteName(spec.Name), o.UID, o.GID, c, c.uid)
	}
	return o, nil
}

// setupLimits resolves cfg's limits into the daemon's descriptor guard and
// quota ledger, and raises the descriptor limit the limits' defaults are
// scaled to.
func setupLimits(cfg Config) (*fdGuard, *ledger, error) {
	if _, ok := cfg.InstanceLimits[Instances]; ok {
		return nil, nil, fmt.Errorf("daemon: --instance-limit instance=...: instances are counted per owner; limit them with --limit instance=N")
	}
	for _, l := range []Limits{cfg.UserLimits, cfg.InstanceLimits, cfg.TotalLimits} {
		for r := range l {
			if r >= numResources {
				return nil, nil, fmt.Errorf("daemon: limit on unknown resource %d", r)
			}
		}
	}
	fds := newFDGuard(raiseFDLimit())
	var mem uint64
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		mem = uint64(si.Totalram) * uint64(si.Unit)
	}
	var none limitSet
	for r := range numResources {
		none[r] = Unlimited
	}
	quota := newLedger(resolve(defaultUserLimits(fds.budget(), mem), cfg.UserLimits), resolve(none, cfg.InstanceLimits),
		resolveTotal(defaultTotalLimits(mem), cfg.TotalLimits))
	return fds, quota, nil
}

// lookupGroup resolves a group given by name or by number; a number need
// not be in the group database.
func lookupGroup(g string) (name string, gid uint32, err error) {
	if n, err := strconv.ParseUint(g, 10, 32); err == nil {
		if grp, err := user.LookupGroupId(g); err == nil {
			return grp.Name, uint32(n), nil
		}
		return g, uint32(n), nil
	}
	grp, err := user.LookupGroup(g)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(grp.Gid, 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("its gid %q is not a number", grp.Gid)
	}
	return grp.Name, uint32(n), nil
}
