package fabric

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Fabric is one distributed switch's records in a Store: typed, validated
// reads and writes under /vrdma/<switch>/.
type Fabric struct {
	st   Store
	name string
	keys keyspace
}

// New returns the switch named sw in st. It does not write anything; Init
// creates the switch record.
func New(st Store, sw string) (*Fabric, error) {
	if err := ValidateName("switch", sw); err != nil {
		return nil, err
	}
	return &Fabric{st: st, name: sw, keys: newKeyspace(sw)}, nil
}

// Store returns the store the switch lives in.
func (f *Fabric) Store() Store { return f.st }

// Name returns the switch's name.
func (f *Fabric) Name() string { return f.name }

func decode[T any](kind string, kv KV) (T, error) {
	var v T
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return v, fmt.Errorf("fabric: %s record at %s is not valid JSON (%v); delete or rewrite it", kind, kv.Key, err)
	}
	return v, nil
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // records are plain structs
	}
	return b
}

func notFound(kind, name string, fix string) error {
	return fmt.Errorf("%w: %s %q; %s", ErrNotFound, kind, name, fix)
}

// Init writes the switch record if it is missing and returns the stored one.
func (f *Fabric) Init(ctx context.Context, s Switch) (Switch, error) {
	if s.Name == "" {
		s.Name = f.name
	}
	if s.Name != f.name {
		return Switch{}, invalid("switch", s.Name, "Name", fmt.Sprintf("the record names switch %q but is written to switch %q", s.Name, f.name), "leave Name empty or use the switch's own name")
	}
	if _, err := f.st.Txn(ctx, []Cond{Absent(f.keys.switchKey())}, []Op{PutOp(f.keys.switchKey(), encode(s), NoLease)}); err != nil && !errors.Is(err, ErrConflict) {
		return Switch{}, err
	}
	return f.Switch(ctx)
}

// Switch returns the switch record.
func (f *Fabric) Switch(ctx context.Context) (Switch, error) {
	kv, err := f.st.Get(ctx, f.keys.switchKey())
	if errors.Is(err, ErrNotFound) {
		return Switch{}, notFound("switch", f.name, "create it (Init, or `vrdma switch create`)")
	}
	if err != nil {
		return Switch{}, err
	}
	return decode[Switch]("switch", kv)
}

// PutPortGroup creates or replaces a port group.
func (f *Fabric) PutPortGroup(ctx context.Context, p PortGroup) error {
	if err := ValidatePortGroup(p); err != nil {
		return err
	}
	_, err := f.st.Put(ctx, f.keys.portGroup(p.Name), encode(p), NoLease)
	return err
}

// PortGroup returns one port group.
func (f *Fabric) PortGroup(ctx context.Context, name string) (PortGroup, error) {
	kv, err := f.st.Get(ctx, f.keys.portGroup(name))
	if errors.Is(err, ErrNotFound) {
		return PortGroup{}, notFound("port group", name, "list them with PortGroups (`vrdma switch`)")
	}
	if err != nil {
		return PortGroup{}, err
	}
	return decode[PortGroup]("port group", kv)
}

// list reads every record of one kind.
func list[T any](ctx context.Context, st Store, kind, prefix string) ([]T, []KV, int64, error) {
	kvs, rev, err := st.List(ctx, prefix)
	if err != nil {
		return nil, nil, 0, err
	}
	out := make([]T, 0, len(kvs))
	for _, kv := range kvs {
		v, err := decode[T](kind, kv)
		if err != nil {
			return nil, nil, 0, err
		}
		out = append(out, v)
	}
	return out, kvs, rev, nil
}

// PortGroups lists the port groups, by name.
func (f *Fabric) PortGroups(ctx context.Context) ([]PortGroup, error) {
	out, _, _, err := list[PortGroup](ctx, f.st, "port group", f.keys.portGroups())
	return out, err
}

// DeletePortGroup removes a port group that no adapter is attached to.
func (f *Fabric) DeletePortGroup(ctx context.Context, name string) error {
	insts, ikvs, _, err := list[Instance](ctx, f.st, "instance", f.keys.instances())
	if err != nil {
		return err
	}
	var users []string
	conds := []Cond{}
	for i, in := range insts {
		conds = append(conds, Unchanged(ikvs[i].Key, ikvs[i].ModRev))
		for _, a := range in.Adapters {
			if a.PortGroup == name {
				users = append(users, fmt.Sprintf("%s/vrdma%d", in.Name, a.Index))
			}
		}
	}
	if len(users) > 0 {
		return fmt.Errorf("%w: port group %q has adapters attached (%s); move or remove them first", ErrInUse, name, strings.Join(users, ", "))
	}
	if _, err := f.st.Txn(ctx, conds, []Op{DeleteOp(f.keys.portGroup(name))}); err != nil {
		return fmt.Errorf("fabric: delete port group %q: %w; instances changed meanwhile, try again", name, err)
	}
	return nil
}

// PutInstance creates or replaces an instance, after checking it against
// the switch (ValidateInstanceIn). The write is conditional on the port
// groups it uses and the other instances not changing meanwhile, so two
// concurrent writers cannot give two adapters the same MAC.
func (f *Fabric) PutInstance(ctx context.Context, in Instance) error {
	if err := ValidateInstance(in); err != nil {
		return err
	}
	groups, gkvs, _, err := list[PortGroup](ctx, f.st, "port group", f.keys.portGroups())
	if err != nil {
		return err
	}
	others, ikvs, _, err := list[Instance](ctx, f.st, "instance", f.keys.instances())
	if err != nil {
		return err
	}
	if err := ValidateInstanceIn(in, groups, others); err != nil {
		return err
	}
	used := map[string]bool{}
	for _, a := range in.Adapters {
		used[a.PortGroup] = true
	}
	var conds []Cond
	for i, g := range groups {
		if used[g.Name] {
			conds = append(conds, Unchanged(gkvs[i].Key, gkvs[i].ModRev))
		}
	}
	self := Absent(f.keys.instance(in.Name))
	for _, kv := range ikvs {
		if kv.Key == self.Key {
			self = Unchanged(kv.Key, kv.ModRev)
		} else {
			conds = append(conds, Unchanged(kv.Key, kv.ModRev))
		}
	}
	conds = append(conds, self)
	if _, err := f.st.Txn(ctx, conds, []Op{PutOp(f.keys.instance(in.Name), encode(in), NoLease)}); err != nil {
		return fmt.Errorf("fabric: put instance %q: %w; the switch changed meanwhile, try again", in.Name, err)
	}
	return nil
}

// Instance returns one instance.
func (f *Fabric) Instance(ctx context.Context, name string) (Instance, error) {
	kv, err := f.st.Get(ctx, f.keys.instance(name))
	if errors.Is(err, ErrNotFound) {
		return Instance{}, notFound("instance", name, "list them with Instances (`vrdma vm`)")
	}
	if err != nil {
		return Instance{}, err
	}
	return decode[Instance]("instance", kv)
}

// Instances lists the instances, by name.
func (f *Fabric) Instances(ctx context.Context) ([]Instance, error) {
	out, _, _, err := list[Instance](ctx, f.st, "instance", f.keys.instances())
	return out, err
}

// DeleteInstance removes an instance (its assignments are freed by the
// subnet manager).
func (f *Fabric) DeleteInstance(ctx context.Context, name string) error {
	_, err := f.st.Delete(ctx, f.keys.instance(name))
	return err
}

// RegisterHost puts the host's record under sess's lease: it stays while
// the daemon keeps the session alive and disappears TTL after the daemon
// stops. A record of the same name from another machine is refused (two
// daemons claiming one name); one from the same machine — a restart, even
// after a reboot — is replaced.
func (f *Fabric) RegisterHost(ctx context.Context, h Host, sess Session) error {
	return f.RegisterHostTrusting(ctx, h, sess, nil)
}

// RegisterHostTrusting is RegisterHost where the record already under the
// host's name stops it only if trust takes that record (with its lease):
// one that trust refuses — not as its host wrote it — is replaced. A nil
// trust takes every record.
func (f *Fabric) RegisterHostTrusting(ctx context.Context, h Host, sess Session, trust func(Host, LeaseID) (Host, error)) error {
	if err := ValidateHost(h); err != nil {
		return err
	}
	key := f.keys.host(h.Name)
	cond := Absent(key)
	if kv, err := f.st.Get(ctx, key); err == nil {
		old, err := decode[Host]("host", kv)
		genuine := err == nil && old.Name == h.Name
		if genuine && trust != nil {
			_, terr := trust(old, kv.Lease)
			genuine = terr == nil
		}
		if genuine && (!old.Identity.SameMachine(h.Identity) || old.Identity.NetNS != h.Identity.NetNS) {
			return invalid("host", h.Name, "Name", fmt.Sprintf("the name is already registered by %s (this daemon is %s)", old.Identity, h.Identity), "give this daemon another host name, or stop the other one (its record goes when its lease ends)")
		}
		cond = Unchanged(key, kv.ModRev)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	if _, err := f.st.Txn(ctx, []Cond{cond}, []Op{PutOp(key, encode(h), sess.Lease())}); err != nil {
		return fmt.Errorf("fabric: register host %q: %w", h.Name, err)
	}
	return nil
}

// LeasedHost is a host record with the lease it is under.
type LeasedHost struct {
	Host  Host
	Lease LeaseID
}

// LeasedHosts lists every host record with its lease; records that do
// not decode are left out.
func (f *Fabric) LeasedHosts(ctx context.Context) ([]LeasedHost, error) {
	kvs, _, err := f.st.List(ctx, f.keys.hosts())
	if err != nil {
		return nil, err
	}
	out := make([]LeasedHost, 0, len(kvs))
	for _, kv := range kvs {
		if h, err := decode[Host]("host", kv); err == nil && h.Name == nameOf(kv.Key) {
			out = append(out, LeasedHost{Host: h, Lease: kv.Lease})
		}
	}
	return out, nil
}

// DeregisterHost removes the host's record now (a clean daemon shutdown).
func (f *Fabric) DeregisterHost(ctx context.Context, name string) error {
	_, err := f.st.Delete(ctx, f.keys.host(name))
	return err
}

// Host returns one live host.
func (f *Fabric) Host(ctx context.Context, name string) (Host, error) {
	kv, err := f.st.Get(ctx, f.keys.host(name))
	if errors.Is(err, ErrNotFound) {
		return Host{}, notFound("host", name, "is its daemon running and connected to this switch's etcd?")
	}
	if err != nil {
		return Host{}, err
	}
	return decode[Host]("host", kv)
}

// Hosts lists the live hosts, by name.
func (f *Fabric) Hosts(ctx context.Context) ([]Host, error) {
	out, _, _, err := list[Host](ctx, f.st, "host", f.keys.hosts())
	return out, err
}

// Assignments lists what the subnet manager assigned, by instance and index.
func (f *Fabric) Assignments(ctx context.Context) ([]Assignment, error) {
	out, _, _, err := list[Assignment](ctx, f.st, "assignment", f.keys.assignments())
	return out, err
}
