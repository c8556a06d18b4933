package vrdma

import "github.com/vrdma/vrdma/internal/proto"

// Admin is a connection for managing the daemon rather than using a device:
// instances, links and the distributed switch. Errors are *Error values of
// the usual classes: ErrPermission when the daemon refuses the caller
// (switch-wide administration without being root or in the daemon's admin
// group), ErrNotFound for an instance that does not exist or that the
// caller may not see (another tenant's: the daemon says the same of both),
// ErrLimit past a quota, ErrBusy, ErrTimeout when the daemon does not
// answer within Options.Timeout, ...
type Admin struct{ c *conn }

// DialAdmin connects to the daemon for administration.
func DialAdmin(o Options) (*Admin, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := dial(o, nil)
	if err != nil {
		return nil, err
	}
	if _, err := c.call(proto.OpHello, proto.HelloReq{Client: o.Client}, nil); err != nil {
		c.close()
		return nil, err
	}
	return &Admin{c: c}, nil
}

// Close closes the connection.
func (a *Admin) Close() error { return a.c.close() }

// Owner is a tenant: the uid and gid an instance belongs to. Only the
// owner (and root) may attach to the instance, delete it or put it in a
// trust group.
type Owner struct {
	UID uint32
	GID uint32
}

// InstanceSpec describes an instance to create.
type InstanceSpec struct {
	// Name is the owner's own: a tenant's "db1" is another tenant's "db1"
	// no more than it is root's; root sees and names uid 1000's as
	// "u1000.db1" (1-63 letters, digits, '.', '_' or '-' in all).
	Name     string
	Adapters int  // 1 to 10: vrdma0, vrdma1, ...
	Async    bool // the daemon polls the adapters' queues on a dedicated thread
	// TrustGroup: instances with the same non-empty group trust each other,
	// as an instance trusts itself: one-sided operations between them skip
	// the daemon. A group holds the instances of one owner, and its name is
	// the owner's own, as instance names are.
	TrustGroup string
	// PortGroup is the switch's port group the adapters attach to ("" =
	// the default one).
	PortGroup string
	// NativeEndpoints: the adapters' QPs are reachable by any RoCEv2 peer;
	// without it, on a switch with certificates, only by the switch's
	// member hosts (their CM requests and packets).
	NativeEndpoints bool
	// Pin: the instance's registered memory must be lockable; creation
	// fails when the daemon cannot lock memory.
	Pin bool
	// LIDRouting: the adapters' ports route by LID: an address vector (a
	// QP's or an address handle's) may name its destination by LID alone,
	// without a GRH, as qperf's do. Without it a GRH is required, as on
	// rdma_rxe and every RoCE port.
	LIDRouting bool
	// Owner is who the instance belongs to; nil: the caller. Naming
	// another owner is for root and the daemon's admin group.
	Owner *Owner
	// Temporary: the daemon deletes the instance once the connection that
	// created it has closed (the process ended, even by SIGKILL) and no
	// process is attached to it any more. It is never saved.
	Temporary bool
	// Uplink names a verbs link the adapters are bound to: their RC QPs
	// and memory regions are that device's, which moves the bytes.
	Uplink string
}

func (s InstanceSpec) proto() proto.InstanceSpec {
	p := proto.InstanceSpec{Name: s.Name, Adapters: s.Adapters, Async: s.Async, TrustGroup: s.TrustGroup,
		PortGroup: s.PortGroup, NativeEndpoints: s.NativeEndpoints, Pin: s.Pin, LIDRouting: s.LIDRouting, Temporary: s.Temporary, Uplink: s.Uplink}
	if s.Owner != nil {
		p.Owner = (*proto.Owner)(s.Owner)
	}
	return p
}

// InstanceInfo describes an instance.
type InstanceInfo struct {
	Name       string
	Host       string
	Owner      *Owner // nil for another host's instance (the switch's record carries none)
	TrustGroup string
	PortGroup  string
	Native     bool
	Async      bool
	Pin        bool
	Temporary  bool
	Remote     bool // on another host of the switch
	Adapters   []DeviceInfo
	Sessions   int // processes attached (this host's instances only)
}

func instanceInfo(p proto.InstanceInfo) InstanceInfo {
	i := InstanceInfo{Name: p.Name, Host: p.Host, TrustGroup: p.TrustGroup, PortGroup: p.PortGroup,
		Native: p.Native, Async: p.Async, Pin: p.Pin, Temporary: p.Temporary, Remote: p.Remote, Sessions: p.Sessions}
	if p.Owner != nil {
		i.Owner = (*Owner)(p.Owner)
	}
	for _, a := range p.Adapters {
		i.Adapters = append(i.Adapters, deviceInfo(a, p.Name, p.Host))
	}
	return i
}

// CreateInstance creates an instance with its adapters.
func (a *Admin) CreateInstance(s InstanceSpec) (InstanceInfo, error) {
	var info proto.InstanceInfo
	if _, err := a.c.call(proto.OpCreateInstance, s.proto(), &info); err != nil {
		return InstanceInfo{}, err
	}
	return instanceInfo(info), nil
}

// DeleteInstance deletes an instance no process is attached to.
func (a *Admin) DeleteInstance(name string) error {
	_, err := a.c.call(proto.OpDeleteInstance, proto.InstanceSpec{Name: name}, nil)
	return err
}

// Instances lists the instances on the host the caller may see: root and
// administrators all, others their own and the default one.
func (a *Admin) Instances() ([]InstanceInfo, error) { return a.instances(false) }

// SwitchInstances is Instances followed by the other hosts' instances on
// the switch (for root and administrators).
func (a *Admin) SwitchInstances() ([]InstanceInfo, error) { return a.instances(true) }

func (a *Admin) instances(all bool) ([]InstanceInfo, error) {
	var r proto.ListInstancesResp
	if _, err := a.c.call(proto.OpListInstances, proto.ListInstancesReq{All: all}, &r); err != nil {
		return nil, err
	}
	out := make([]InstanceInfo, 0, len(r.Instances))
	for _, p := range r.Instances {
		out = append(out, instanceInfo(p))
	}
	return out, nil
}

// DaemonStats counts the daemon's live objects.
type DaemonStats struct {
	Sessions int
	PDs      int
	MRs      int
	CQs      int
	QPs      int
	SRQs     int
	AHs      int
	Workers  int
}

// Stats returns the daemon's object counts.
func (a *Admin) Stats() (DaemonStats, error) {
	var s proto.StatsResp
	if _, err := a.c.call(proto.OpStats, nil, &s); err != nil {
		return DaemonStats{}, err
	}
	return DaemonStats(s), nil // the wire's record less its JSON tags
}
