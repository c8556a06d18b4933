package daemon

// UsedBy returns what uid holds, by resource name ("qp", "locked", ...),
// for the tests of package daemon_test; resources at zero are left out.
func (d *Daemon) UsedBy(uid uint32) map[string]uint64 {
	return named(d.quota.usedBy(uid))
}

// InstanceUsage returns what the instance called name holds (nil if there
// is no such instance, or it is the default one).
func (d *Daemon) InstanceUsage(name string) map[string]uint64 {
	inst := d.insts.lookup(name)
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

// QPAlive reports whether the host still has the QP numbered qpn on the
// adapter with GID gid.
func (d *Daemon) QPAlive(gid []byte, qpn uint32) bool {
	return d.host.LookupQP([16]byte(gid), qpn) != nil
}

// HoldSessions takes the lock of every session, as a long command does:
// a session's teardown waits for it to destroy the session's objects.
func (d *Daemon) HoldSessions() (release func()) {
	d.mu.Lock()
	var held []*session
	for s := range d.sessions {
		s.mu.Lock()
		held = append(held, s)
	}
	d.mu.Unlock()
	return func() {
		for _, s := range held {
			s.mu.Unlock()
		}
	}
}

// InstanceUplinks returns, per adapter of the instance called name, the
// verbs link it is bound to ("" if none) and its GID table.
func (d *Daemon) InstanceUplinks(name string) (links []string, gids [][][16]byte) {
	inst := d.insts.lookup(name)
	if inst == nil {
		return nil, nil
	}
	for _, a := range inst.Adapters {
		n := ""
		if u := a.Uplink(); u != nil {
			n = u.Name
		}
		links = append(links, n)
		gids = append(gids, a.GIDs())
	}
	return links, gids
}

// VerbsHelperPID returns the process id of the helper of verbs link name,
// 0 if it has none.
func (d *Daemon) VerbsHelperPID(name string) int {
	t := &d.links
	t.mu.Lock()
	e, ok := t.m[name]
	t.mu.Unlock()
	if !ok {
		return 0
	}
	e.verbs.mu.Lock()
	defer e.verbs.mu.Unlock()
	if e.verbs.dev == nil {
		return 0
	}
	return e.verbs.dev.PID()
}
