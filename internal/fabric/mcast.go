package fabric

// The switch's record of the multicast groups (docs/design/multicast.md,
// "The switch's record"): which tenant has QPs attached to which group on
// which host. Each host writes its own under its lease, so a daemon that
// stops takes its groups with it.

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// McastGroup is one tenant's group on one host.
type McastGroup struct {
	Host string `json:"host"`
	// Tenant is the group's owner as the daemons name tenants: "uid N",
	// the owner of the instance (or the session's uid on a host's default
	// instance), the same uid on every host of the switch.
	Tenant string `json:"tenant"`
	// Group is the group's IP address: an IPv4 group for an IPv4-mapped
	// MGID, else the MGID as an IPv6 address.
	Group string `json:"group"`
	QPs   int    `json:"qps"` // QPs of the tenant attached on the host
}

// maxTenantLen bounds a tenant's name ("uid 4294967295" is 14).
const maxTenantLen = 32

// ValidateMcastGroup checks a group record on its own.
func ValidateMcastGroup(g McastGroup) error {
	const kind = "multicast group"
	if err := ValidateName("host", g.Host); err != nil {
		return invalid(kind, g.Group, "Host", err.Error(), "")
	}
	if g.Tenant == "" || len(g.Tenant) > maxTenantLen || strings.ContainsAny(g.Tenant, "/_") {
		return invalid(kind, g.Group, "Tenant", fmt.Sprintf("tenant %q is not a tenant's name", g.Tenant), `name it as the daemons do, "uid N"`)
	}
	if err := ValidateName("tenant", tenantKey(g.Tenant)); err != nil {
		return invalid(kind, g.Group, "Tenant", err.Error(), `name it as the daemons do, "uid N"`)
	}
	a, err := netip.ParseAddr(g.Group)
	if err != nil || !a.IsMulticast() || a.Zone() != "" {
		return invalid(kind, g.Group, "Group", "not an IPv4 or IPv6 multicast address", "give the group's address, e.g. 239.1.2.3 or ff0e::1")
	}
	if a.Is4In6() || g.Group != a.String() {
		return invalid(kind, g.Group, "Group", "not written in its canonical form", "write "+a.Unmap().String())
	}
	if g.QPs < 1 {
		return invalid(kind, g.Group, "QPs", fmt.Sprintf("%d QPs attached", g.QPs), "a group has at least one QP; delete the record of one that has none")
	}
	return nil
}

// tenantKey is a tenant's name as a key element: its spaces made '_'.
func tenantKey(tenant string) string { return strings.ReplaceAll(tenant, " ", "_") }

// PutMcastGroup writes a group record of this host under its lease.
func (f *Fabric) PutMcastGroup(ctx context.Context, g McastGroup, lease LeaseID) error {
	if err := ValidateMcastGroup(g); err != nil {
		return err
	}
	if _, err := f.st.Put(ctx, f.keys.mcastGroup(g.Host, tenantKey(g.Tenant), g.Group), encode(g), lease); err != nil {
		return fmt.Errorf("fabric: put multicast group %s of %s on %s: %w", g.Group, g.Tenant, g.Host, err)
	}
	return nil
}

// DeleteMcastGroup removes a group record; a missing one is not an error.
func (f *Fabric) DeleteMcastGroup(ctx context.Context, host, tenant, group string) error {
	if _, err := f.st.Delete(ctx, f.keys.mcastGroup(host, tenantKey(tenant), group)); err != nil {
		return fmt.Errorf("fabric: delete multicast group %s of %s on %s: %w", group, tenant, host, err)
	}
	return nil
}

// McastGroups lists the switch's group records, by host, tenant and group.
// A record that is not valid, or whose key does not match its content
// (written by hand, or by another host under this one's name), is left
// out.
func (f *Fabric) McastGroups(ctx context.Context) ([]McastGroup, error) {
	kvs, _, err := f.st.List(ctx, f.keys.mcastGroups())
	if err != nil {
		return nil, err
	}
	out := make([]McastGroup, 0, len(kvs))
	for _, kv := range kvs {
		g, err := decode[McastGroup]("multicast group", kv)
		if err != nil || ValidateMcastGroup(g) != nil || kv.Key != f.keys.mcastGroup(g.Host, tenantKey(g.Tenant), g.Group) {
			continue
		}
		out = append(out, g)
	}
	return out, nil
}
