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

// reconcile runs one full pass: read instances and assignments, plan, write.
// It returns the revision the instances were read at.
func (sm *subnetManager) reconcile(ctx context.Context) (Report, int64, error) {
	f := sm.f
	insts, _, rev, err := list[Instance](ctx, f.st, "instance", f.keys.instances())
	if err != nil {
		return Report{}, 0, err
	}
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
	puts, dels, rep := plan(insts, cur, sm.cfg)
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

// follow watches the instances from rev+1 and reconciles after each change,
// until ctx ends or an error; it returns the last revision handled.
func (sm *subnetManager) follow(ctx context.Context, rev int64, report func(Report)) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range sm.f.st.Watch(wctx, sm.f.keys.instances(), rev+1) {
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
	return rev, ctx.Err()
}
