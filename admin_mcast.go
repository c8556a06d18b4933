package vrdma

import "github.com/vrdma/vrdma/internal/proto"

// McastGroup is one tenant's multicast group on one host of the switch,
// as the switch records it (docs/design/multicast.md).
type McastGroup struct {
	Group  string `json:"group"`  // the group's IP address: 239.1.2.3, ff0e::1
	Tenant string `json:"tenant"` // its owner, "uid N"
	Host   string `json:"host"`   // the host whose QPs are attached
	QPs    int    `json:"qps"`    // how many of the tenant's QPs are attached there
}

// McastGroups lists the switch's multicast groups: every tenant's for an
// administrator (root, the daemon's user, --admin-group), the caller's
// own tenant's for anyone else.
func (a *Admin) McastGroups() ([]McastGroup, error) {
	var r proto.McastListResp
	if _, err := a.c.call(proto.OpMcastList, nil, &r); err != nil {
		return nil, err
	}
	out := make([]McastGroup, 0, len(r.Groups))
	for _, g := range r.Groups {
		out = append(out, McastGroup{Group: g.Group, Tenant: g.Tenant, Host: g.Host, QPs: g.QPs})
	}
	return out, nil
}
