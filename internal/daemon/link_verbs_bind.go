package daemon

// Instances bound to a verbs link (`vrdma vm create NAME --uplink LINK`):
// their adapters' RC QPs and regions are the device's (engine/device.go).

import (
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/verbs"
)

// gidTable is the port's GID table by index, as ibv_query_gid gives it:
// the instances bound to the port report these GIDs and name them by index
// in their address vectors.
func gidTable(p verbs.PortAttr) [][16]byte {
	n := 0
	for _, g := range p.GIDs {
		if int(g.Index) >= n && g.Index < engine.GIDTable {
			n = int(g.Index) + 1
		}
	}
	t := make([][16]byte, n)
	for _, g := range p.GIDs {
		if g.Index < engine.GIDTable {
			t[g.Index] = g.GID
		}
	}
	return t
}

// deviceUplink returns the device of the verbs link called name (checked
// by validateSpec), for binding an instance's adapters to it.
func (t *linkTable) deviceUplink(name string) (*engine.DeviceUplink, error) {
	t.mu.Lock()
	e, ok := t.m[name]
	t.mu.Unlock()
	if !ok || e.spec.Type != verbsLinkType {
		return nil, proto.Errorf(proto.CodeNotFound, "no verbs link %s: `vrdma link add %s type verbs dev IBDEV` makes one, `vrdma link show` lists them", name, name)
	}
	e.verbs.mu.Lock()
	u := e.verbs.eng
	e.verbs.mu.Unlock()
	if u == nil {
		return nil, proto.Errorf(proto.CodeState, "verbs link %s has no open device (`vrdma link show %s` says why)", name, name)
	}
	return u, nil
}
