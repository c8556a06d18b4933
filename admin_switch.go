package vrdma

import (
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/switchview"
)

// The distributed switch, as a daemon on it sees it. The records are
// package switchview's, as the daemon sends them; their JSON tags are what
// `vrdma switch show --json` and its kin print.

// Switch describes the switch the daemon is on (an error if none).
func (a *Admin) Switch() (switchview.Switch, error) {
	var s switchview.Switch
	if _, err := a.c.call(proto.OpSwitchShow, nil, &s); err != nil {
		return switchview.Switch{}, err
	}
	return s, nil
}

// Hosts lists the switch's live hosts.
func (a *Admin) Hosts() ([]switchview.Host, error) {
	var r switchview.HostList
	if _, err := a.c.call(proto.OpHostList, nil, &r); err != nil {
		return nil, err
	}
	return nonNil(r.Hosts), nil
}

// PortGroups lists the switch's port groups.
func (a *Admin) PortGroups() ([]switchview.PortGroup, error) {
	var r switchview.PortGroupList
	if _, err := a.c.call(proto.OpPortGroupList, nil, &r); err != nil {
		return nil, err
	}
	return nonNil(r.PortGroups), nil
}

// AddPortGroup creates or replaces a port group (root and the admin
// group). Its Adapters is not read.
func (a *Admin) AddPortGroup(p switchview.PortGroup) error {
	p.Adapters = 0
	_, err := a.c.call(proto.OpPortGroupAdd, p, nil)
	return err
}

// DeletePortGroup deletes a port group no adapter is attached to (root and
// the admin group).
func (a *Admin) DeletePortGroup(name string) error {
	_, err := a.c.call(proto.OpPortGroupDelete, switchview.PortGroup{Name: name}, nil)
	return err
}

// Path returns the path between two adapters named INSTANCE/vrdmaN.
func (a *Admin) Path(adapterA, adapterB string) (switchview.Path, error) {
	return a.path(proto.PathReq{A: adapterA, B: adapterB})
}

// PathFor returns the path between two adapters for QPs that ask req.
func (a *Admin) PathFor(adapterA, adapterB string, req switchview.PathRequest) (switchview.Path, error) {
	return a.path(proto.PathReq{A: adapterA, B: adapterB, Request: &req})
}

func (a *Admin) path(req proto.PathReq) (switchview.Path, error) {
	var r switchview.Path
	if _, err := a.c.call(proto.OpPath, req, &r); err != nil {
		return switchview.Path{}, err
	}
	return r, nil
}

// nonNil is s, or an empty slice for none, so that an empty list prints
// as [] in `--json`, not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
