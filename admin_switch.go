package vrdma

import "github.com/vrdma/vrdma/internal/proto"

// The distributed switch, as a daemon on it sees it.

// SwitchInfo describes the switch: its etcd, its subnet manager, counts.
type SwitchInfo = proto.SwitchInfo

// PortGroup is a segment of the switch: VLAN, priority, path MTU and
// partition of the adapters attached to it.
type PortGroup = proto.PortGroupSpec

// HostInfo is a live host of the switch, with the path from this one.
type HostInfo = proto.HostInfo

// PathInfo is the path between two adapters, and why.
type PathInfo = proto.PathResp

// Switch describes the switch the daemon is on (an error if none).
func (a *Admin) Switch() (SwitchInfo, error) {
	var s SwitchInfo
	_, err := a.c.call(proto.OpSwitchShow, nil, &s)
	return s, err
}

// Hosts lists the switch's live hosts.
func (a *Admin) Hosts() ([]HostInfo, error) {
	var r proto.HostListResp
	_, err := a.c.call(proto.OpHostList, nil, &r)
	return r.Hosts, err
}

// PortGroups lists the switch's port groups.
func (a *Admin) PortGroups() ([]PortGroup, error) {
	var r proto.PortGroupListResp
	_, err := a.c.call(proto.OpPortGroupList, nil, &r)
	return r.PortGroups, err
}

// AddPortGroup creates or replaces a port group.
func (a *Admin) AddPortGroup(p PortGroup) error {
	_, err := a.c.call(proto.OpPortGroupAdd, p, nil)
	return err
}

// DeletePortGroup deletes a port group no adapter is attached to.
func (a *Admin) DeletePortGroup(name string) error {
	_, err := a.c.call(proto.OpPortGroupDelete, PortGroup{Name: name}, nil)
	return err
}

// Path returns the path between two adapters named INSTANCE/vrdmaN.
func (a *Admin) Path(adapterA, adapterB string) (PathInfo, error) {
	var r PathInfo
	_, err := a.c.call(proto.OpPath, proto.PathReq{A: adapterA, B: adapterB}, &r)
	return r, err
}
