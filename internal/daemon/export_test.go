package daemon

// UsedBy returns what uid holds, by resource name ("qp", "locked", ...),
// for the tests of package daemon_test; resources at zero are left out.
func (d *Daemon) UsedBy(uid uint32) map[string]uint64 {
	return named(d.quota.usedBy(uid))
}

// InstanceUsage returns what the instance called name holds (nil if there
// is no such instance, or it is the default one).
func (d *Daemon) InstanceUsage(name string) map[string]uint64 {
	inst := d.instance(name)
	if inst == nil || inst.acct == nil {
		return nil
	}
	return named(d.quota.usage(inst.acct))
}

// TotalUsage returns what all tenants together hold, by resource name.
func (d *Daemon) TotalUsage() map[string]uint64 {
	return named(d.quota.usage(d.quota.total))
}

func named(l limitSet) map[string]uint64 {
	out := map[string]uint64{}
	for r := range numResources {
		if l[r] != 0 {
			out[r.String()] = l[r]
		}
	}
	return out
}
