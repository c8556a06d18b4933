package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// The daemon's instances: created, attached to, listed, deleted, saved
// in StateDir/instances.json and, when temporary, reaped.

// instanceTable is the daemon's instances by name, with what creates,
// attaches to, lists, deletes, saves and reaps them. It is guarded by the
// daemon's mu, which also guards the sessions attached to the instances
// and the daemon's closed flag: an instance cannot be deleted between the
// check that no session holds it and its removal, nor created once the
// daemon is closing. The daemon (d) gives it that lock, the sessions and
// the parts the instances are made of: the host, the quota ledger, the
// links, the access policy.
type instanceTable struct {
	d *Daemon
	m map[string]*Instance
}

// create creates an instance of owner. by is the session that
// asks (its peer's permissions were checked for the owner; the trust group
// is checked here, under the lock that creation takes), nil for the
// daemon's own (the default instance, the saved ones). persist saves the
// table. lids are the LIDs the adapters had (saved), which they keep if
// they can on a daemon with no switch.
func (t *instanceTable) create(spec proto.InstanceSpec, owner proto.Owner, by *session, persist bool, lids []uint16) (*Instance, error) {
	d := t.d
	var err error
	if spec, err = ownSpec(spec, owner.UID, by != nil); err != nil {
		return nil, err
	}
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	if spec.Temporary && by == nil {
		return nil, proto.Errorf(proto.CodeInvalid, "instance %q: a temporary instance needs a session to live with", spec.Name)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, proto.Errorf(proto.CodeState, "the daemon is stopping")
	}
	if _, ok := t.m[spec.Name]; ok {
		return nil, proto.Errorf(proto.CodeBusy, "instance %s exists already: pick another name or delete it first", quoteName(by.shown(spec.Name)))
	}
	if by != nil {
		if err := t.mayJoinTrustGroupLocked(by.cred, spec.Name, spec.TrustGroup, owner); err != nil {
			return nil, err
		}
		// A bound instance's QPs and regions are made on the host's device
		// by the daemon's helper, with the daemon's rights, which need not
		// be the owner's (/dev/infiniband/uverbs* decides for the owner's
		// own programs): binding is the administrators' to grant.
		if spec.Uplink != "" && !d.access.isAdmin(by.cred) {
			return nil, proto.Errorf(proto.CodePermission, "instance %s on verbs link %s: binding an instance to the host's RDMA device is for root, the daemon's user or its admin group; ask one of them to create it (vrdma vm create NAME --uplink LINK --owner USER[:GROUP])",
				quoteName(by.shown(spec.Name)), quoteName(spec.Uplink))
		}
	}
	// The default instance is the daemon's, counted against nobody.
	shared := spec.Name == DefaultInstance
	var ownerAcct *account
	if !shared {
		ownerAcct = d.quota.join(owner.UID)
		if by != nil {
			if err := d.quota.charge(nil, Instances, 1, ownerAcct); err != nil {
				d.quota.leave(owner.UID, ownerAcct)
				return nil, err
			}
		} else {
			d.quota.add(Instances, 1, ownerAcct) // the saved ones are never refused
		}
	}
	if spec.Async && by != nil {
		// The host's poller (created with the first async adapter) takes a
		// doorbell pipe.
		if err := d.fds.admit(2); err != nil {
			if ownerAcct != nil {
				d.quota.release(nil, Instances, 1, ownerAcct)
				d.quota.leave(owner.UID, ownerAcct)
			}
			return nil, err
		}
	}
	var uplink *engine.DeviceUplink
	if spec.Uplink != "" {
		u, err := d.links.deviceUplink(spec.Uplink)
		if err != nil {
			if ownerAcct != nil {
				d.quota.release(nil, Instances, 1, ownerAcct)
				d.quota.leave(owner.UID, ownerAcct)
			}
			return nil, err
		}
		uplink = u
	}
	inst := &Instance{Name: spec.Name, Async: spec.Async, TrustGroup: spec.TrustGroup, Uplink: spec.Uplink,
		PortGroup: spec.PortGroup, Native: spec.NativeEndpoints, Pin: spec.Pin, LIDRouting: spec.LIDRouting,
		Owner: owner, Temporary: spec.Temporary, shared: shared, owner: ownerAcct}
	if !shared {
		inst.acct = d.quota.instanceAccount(spec.Name)
	}
	if spec.Temporary {
		inst.creator = by
	}
	// The default instance's adapters are in no engine instance: its users
	// may be different uids, so its adapters trust nobody.
	trustDomain := spec.Name
	if shared {
		trustDomain = ""
	}
	for i := 0; i < spec.Adapters; i++ {
		var a *engine.Adapter
		for salt := 0; ; salt++ {
			mac := macFor(d.ident.macHost(d.cfg.HostName), spec.Name, i, salt)
			if d.host.AdapterByGID(engine.LinkLocalGID(mac)) == nil {
				a = engine.NewAdapter(trustDomain, fmt.Sprintf("vrdma%d", i), i, mac, spec.Async)
				a.TrustGroup = spec.TrustGroup
				a.NativeEndpoint = spec.NativeEndpoints
				if uplink != nil {
					_ = a.Bind(uplink) // a new adapter has nothing yet
				}
				break
			}
		}
		d.host.AddAdapter(a)
		inst.Adapters = append(inst.Adapters, a)
	}
	d.lids.giveLocked(inst, lids)
	t.m[spec.Name] = inst
	if persist && !spec.Temporary {
		if err := t.saveLocked(); err != nil {
			d.log.Warn("could not save instances", "err", err)
		}
	}
	return inst, nil
}

// delete deletes the instance called name for by (nil: the daemon
// itself), unless processes are attached to it.
// name is canonical when by is nil, and by's name for it otherwise
// (lookupName); delete returns the canonical name.
func (t *instanceTable) delete(name string, by *session) (string, error) {
	d := t.d
	asked := name
	if by != nil {
		var err error
		if name, err = lookupName(by.cred, name); err != nil {
			return "", err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	inst, ok := t.m[name]
	// Another's instance that by may not see is one that does not exist:
	// the refusal says the same, so that it tells nothing of who has what.
	if !ok || by != nil && !d.access.maySee(by.cred, inst) {
		return "", proto.Errorf(proto.CodeNotFound, "no instance %s: `vrdma vm show` lists them", quoteName(asked))
	}
	if inst.shared {
		return "", proto.Errorf(proto.CodeInvalid, "the default instance cannot be deleted")
	}
	if by != nil {
		if err := d.access.mayDelete(by.cred, inst); err != nil {
			return "", err
		}
	}
	if n := t.attachedLocked(inst); n > 0 {
		return "", proto.Errorf(proto.CodeBusy, "instance %s has %d attached processes: close them first", quoteName(asked), n)
	}
	t.removeLocked(inst)
	if !inst.Temporary {
		if err := t.saveLocked(); err != nil {
			d.log.Warn("could not save instances", "err", err)
		}
	}
	return name, nil
}

// removeLocked takes inst's adapters off the host and gives its
// owner's instance back.
func (t *instanceTable) removeLocked(inst *Instance) {
	d := t.d
	for _, a := range inst.Adapters {
		d.host.RemoveAdapter(a)
		a.Close()
	}
	delete(t.m, inst.Name)
	if inst.owner != nil {
		d.quota.release(nil, Instances, 1, inst.owner)
		d.quota.leave(inst.Owner.UID, inst.owner)
	}
}

// attachedLocked counts the sessions attached to inst.
func (t *instanceTable) attachedLocked(inst *Instance) int {
	d := t.d
	n := 0
	for s := range d.sessions {
		if s.instance() == inst {
			n++
		}
	}
	return n
}

// attach attaches s to the instance called name ("" = the default), if
// its peer may, binds it to the instance's adapter called device ("" =
// none: an administration session), and charges the instance a session.
// All of it is done under d.mu, so that the instance cannot be deleted
// between the check and the attachment.
func (t *instanceTable) attach(s *session, name, device string) (*Instance, error) {
	d := t.d
	canon, err := lookupName(s.cred, name)
	if err != nil {
		return nil, err
	}
	if device != "" {
		if err := checkName("device", device); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	inst := t.m[canon]
	// Another's instance that s may not see is one that does not exist:
	// the refusal says the same, so that it tells nothing of who has what.
	if inst == nil || !d.access.maySee(s.cred, inst) {
		return nil, proto.Errorf(proto.CodeNotFound, "no instance %s on this host: create it with `vrdma vm create NAME`, or unset VRDMA_INSTANCE to use the default", quoteName(name))
	}
	if err := d.access.mayAttach(s.cred, inst); err != nil {
		return nil, err
	}
	var adapter *engine.Adapter
	if device != "" {
		for _, a := range inst.Adapters {
			if a.Name == device {
				adapter = a
			}
		}
		if adapter == nil {
			return nil, proto.Errorf(proto.CodeNotFound, "no device %s in instance %s: `vrdma devices` lists them", quoteName(device), quoteName(shownName(s.cred, inst.Name)))
		}
	}
	if err := d.quota.charge(nil, Sessions, 1, inst.acct); err != nil {
		return nil, err
	}
	s.acct, s.adapter = inst.acct, adapter
	s.inst.Store(inst)
	return inst, nil
}

// all returns the instances, as they are now.
func (t *instanceTable) all() []*Instance {
	d := t.d
	d.mu.Lock()
	insts := make([]*Instance, 0, len(t.m))
	for _, inst := range t.m {
		insts = append(insts, inst)
	}
	d.mu.Unlock()
	return insts
}

// lookup returns the instance called name ("" = the default), or nil.
func (t *instanceTable) lookup(name string) *Instance {
	d := t.d
	if name == "" {
		name = DefaultInstance
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return t.m[name]
}

// list describes the instances viewer may see: administrators
// all of them, others their own and the default one.
func (t *instanceTable) list(viewer creds) []proto.InstanceInfo {
	d := t.d
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []proto.InstanceInfo
	for _, inst := range t.m {
		if !d.access.maySee(viewer, inst) {
			continue
		}
		info := instanceInfo(inst, d.cfg.HostName, viewer)
		info.Sessions = t.attachedLocked(inst)
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// endSession forgets a session that has ended and deletes the temporary
// instances nothing holds any more: those whose creator has ended and to
// which no process is attached.
func (t *instanceTable) endSession(s *session) {
	d := t.d
	d.mu.Lock()
	delete(d.sessions, s)
	var reaped []string
	for _, inst := range t.m {
		if !inst.Temporary {
			continue
		}
		if inst.creator == s {
			inst.creator = nil
		}
		if inst.creator == nil && t.attachedLocked(inst) == 0 {
			t.removeLocked(inst)
			reaped = append(reaped, inst.Name)
		}
	}
	d.mu.Unlock()
	s.leave()
	for _, name := range reaped {
		d.log.Debug("temporary instance ended with its last session", "instance", name)
		d.sw.unpublish(name)
	}
}

// mayJoinTrustGroupLocked checks, with d.mu held, that an instance of owner may
// join trust group g: its members map each other's memory, so every
// instance already in it on this host must have the same owner. Only a
// privileged peer may mix owners.
func (t *instanceTable) mayJoinTrustGroupLocked(c creds, name, g string, owner proto.Owner) error {
	d := t.d
	if g == "" || d.access.privileged(c) {
		return nil
	}
	for _, inst := range t.m {
		if inst.TrustGroup == g && inst.Owner.UID != owner.UID {
			return proto.Errorf(proto.CodePermission, "instance %s may not join trust group %s: the members of a trust group map each other's memory, so a group holds the instances of one owner, and root has put another owner's in it; pick another group name",
				quoteName(shownName(c, name)), quoteName(shownName(c, g)))
		}
	}
	return nil
}

const instancesFile = "instances.json"

// savedInstance is an instance as instancesFile keeps it: its spec and its
// adapters' LIDs (which a daemon on no switch gives them again).
type savedInstance struct {
	proto.InstanceSpec
	LIDs []uint16 `json:"lids,omitempty"`
}

// saveLocked writes the instances that persist (not the default,
// not the temporary ones), with their owners and LIDs.
func (t *instanceTable) saveLocked() error {
	d := t.d
	if d.cfg.StateDir == "" {
		return nil
	}
	specs := []savedInstance{}
	for _, inst := range t.m {
		if !inst.shared && !inst.Temporary {
			saved := savedInstance{InstanceSpec: inst.spec()}
			for _, a := range inst.Adapters {
				saved.LIDs = append(saved.LIDs, a.LID())
			}
			specs = append(specs, saved)
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return writeState(d.cfg.StateDir, instancesFile, specs)
}

// load creates the saved instances. One saved without an owner
// (by a daemon before owners) is root's; one marked temporary is dropped.
// With bound false it creates those bound to no verbs link, with true the
// bound ones (after the links are restored): one whose link is not up is
// left out with a warning, not a failed start.
func (t *instanceTable) load(bound bool) error {
	d := t.d
	if d.cfg.StateDir == "" {
		return nil
	}
	path := filepath.Join(d.cfg.StateDir, instancesFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("daemon: read %s: %w", path, err)
	}
	var specs []savedInstance
	if err := json.Unmarshal(b, &specs); err != nil {
		return fmt.Errorf("daemon: %s is not valid JSON (%v): fix or remove it", path, err)
	}
	for _, s := range specs {
		if s.Temporary || (s.Uplink != "") != bound {
			continue
		}
		var owner proto.Owner // root
		if s.Owner != nil {
			owner = *s.Owner
		}
		s.Owner = nil
		if _, err := t.create(s.InstanceSpec, owner, nil, false, s.LIDs); err != nil {
			if bound {
				d.log.Warn("instance not restored: its verbs link is not up; `vrdma vm create` it again once the link is", "instance", s.Name, "uplink", s.Uplink, "err", err)
				continue
			}
			return fmt.Errorf("daemon: %s: %w", path, err)
		}
	}
	return nil
}
