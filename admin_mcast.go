package vrdma

import (
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/switchview"
)

// McastGroups lists the switch's multicast groups: every tenant's for an
// administrator (root, the daemon's user, --admin-group), the caller's
// own tenant's for anyone else.
func (a *Admin) McastGroups() ([]switchview.McastGroup, error) {
	var r switchview.McastList
	if _, err := a.c.call(proto.OpMcastList, nil, &r); err != nil {
		return nil, err
	}
	return nonNil(r.Groups), nil
}
