package daemon

import (
	"sort"

	"github.com/vrdma/vrdma/switchview"
)

// cmdMcastList is `vrdma mcast show`: the switch's record of the
// multicast groups (docs/design/multicast.md, "The switch's record"). An
// administrator sees every tenant's; anyone else only the groups of the
// tenant its own sessions are, "uid N" (its instances' groups and its
// default-instance sessions'): a tenant never learns another's groups.
func cmdMcastList(s *session, _ []byte, _ []int) (any, []int, error) {
	sw, ctx, cancel, err := s.switchCtx()
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	groups, err := sw.Fabric().McastGroups(ctx)
	if err != nil {
		return nil, nil, switchErr(err)
	}
	all := s.d.access.isAdmin(s.cred)
	own := mcastTenant(s.cred.uid)
	resp := switchview.McastList{Groups: []switchview.McastGroup{}}
	for _, g := range groups {
		if !all && g.Tenant != own {
			continue
		}
		resp.Groups = append(resp.Groups, switchview.McastGroup{Group: g.Group, Tenant: g.Tenant, Host: g.Host, QPs: g.QPs})
	}
	sort.SliceStable(resp.Groups, func(i, j int) bool {
		a, b := resp.Groups[i], resp.Groups[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		return a.Host < b.Host
	})
	return resp, nil, nil
}
