package fabric

import (
	"context"
	"errors"
	"fmt"
)

// subnetManager is the work of the role's holder: keep every adapter's
// assignment valid. Its writes are fenced by its election key.
type subnetManager struct {
	f   *Fabric
	el  Election
	cfg SMConfig
}

// maxTxnOps stays under etcd's default limit of 128 operations per
// transaction.
const maxTxnOps = 100

// reconcile runs one full pass: read instances, hosts and assignments,
// plan, write. It returns the revision the instances and hosts were read
// at (the earlier of the two).
func (sm *subnetManager) reconcile(ctx context.Context) (Report, int64, error) {
	f := sm.f
	insts, _, rev, err := list[Instance](ctx, f.st, "instance", f.keys.instances())
	if err != nil {
		return Report{}, 0, err
	}
	hosts, hrev, err := sm.hostNames(ctx)
	if err != nil {
		return Report{}, 0, err
	}
	rev = min(rev, hrev)
	kvs, _, err := f.st.List(ctx, f.keys.assignments())
	if err != nil {
		return Report{}, 0, err
	}
	cur := make([]storedAssignment, 0, len(kvs))
	for _, kv := range kvs {
		s := storedAssignment{key: kv.Key}
		s.ref, _ = parseAssignKey(f.keys.assignments(), kv.Key)
		if a, err := decode[Assignment]("assignment", kv); err == nil {
			s.a, s.ok = a, true
		}
		cur = append(cur, s)
	}
	puts, dels, rep := plan(insts, hosts, cur, sm.cfg)
	ops := make([]Op, 0, len(puts)+len(dels))
	for _, k := range dels {
		ops = append(ops, DeleteOp(k))
	}
	for _, a := range puts {
		ops = append(ops, PutOp(f.keys.assignment(a.Instance, a.Index), encode(a), NoLease))
	}
	fence := []Cond{{Key: sm.el.Key(), Target: CmpCreate, Rev: sm.el.Rev()}}
	for len(ops) > 0 {
		n := min(len(ops), maxTxnOps)
		if _, err := f.st.Txn(ctx, fence, ops[:n]); err != nil {
			if errors.Is(err, ErrConflict) {
				return rep, rev, fmt.Errorf("%w: the election key is gone", ErrNotLeader)
			}
			return rep, rev, err
		}
		ops = ops[n:]
	}
	return rep, rev, nil
}

// hostNames lists the hosts that have a record (whose default instances
// get assignments), and the revision it was read at. A record that does
// not decode, or sits under another host's name, names no host.
func (sm *subnetManager) hostNames(ctx context.Context) ([]string, int64, error) {
	kvs, rev, err := sm.f.st.List(ctx, sm.f.keys.hosts())
	if err != nil {
		return nil, 0, err
	}
	names := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		if h, err := decode[Host]("host", kv); err == nil && h.Name == nameOf(kv.Key) && ValidateName("host", h.Name) == nil {
			names = append(names, h.Name)
		}
	}
	return names, rev, nil
}

// follow watches the instances and the hosts from rev+1 and reconciles
// after each change, until ctx ends or an error; it returns the last
// revision handled.
func (sm *subnetManager) follow(ctx context.Context, rev int64, report func(Report)) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	insts := sm.f.st.Watch(wctx, sm.f.keys.instances(), rev+1)
	hosts := sm.f.st.Watch(wctx, sm.f.keys.hosts(), rev+1)
	for {
		var wr WatchResponse
		var ok bool
		select {
		case wr, ok = <-insts:
		case wr, ok = <-hosts:
		}
		if !ok {
			return rev, ctx.Err()
		}
		if wr.Err != nil {
			return rev, wr.Err
		}
		rep, r, err := sm.reconcile(ctx)
		if err != nil {
			return rev, err
		}
		rev = r
		report(rep)
		// Changes up to r are covered by this pass: watch again from there.
		if r > wr.Rev {
			return rev, nil
		}
	}
}
