package fabric

import (
	"context"
	"time"
)

// followRetry is how long FollowAssignments waits before it lists again
// after its watch failed (a compacted revision, a member gone).
const followRetry = 500 * time.Millisecond

// FollowAssignments reports the subnet manager's assignments: every one
// there is now, then the whole set again after each change, until ctx
// ends (the channel is then closed). A receiver that falls behind misses
// only sets that a later one replaces: the channel holds the latest. When
// the watch fails it lists again, so a compacted history or a member that
// went away costs a moment, not the table. Records that do not decode are
// left out.
func (f *Fabric) FollowAssignments(ctx context.Context) (<-chan []Assignment, error) {
	cur, rev, err := f.listAssignments(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan []Assignment, 1)
	go f.followAssignments(ctx, cur, rev, out)
	return out, nil
}

// listAssignments reads the assignments by key, and the revision they were
// read at.
func (f *Fabric) listAssignments(ctx context.Context) (map[string]Assignment, int64, error) {
	kvs, rev, err := f.st.List(ctx, f.keys.assignments())
	if err != nil {
		return nil, 0, err
	}
	cur := make(map[string]Assignment, len(kvs))
	for _, kv := range kvs {
		if a, err := decode[Assignment]("assignment", kv); err == nil {
			cur[kv.Key] = a
		}
	}
	return cur, rev, nil
}

func (f *Fabric) followAssignments(ctx context.Context, cur map[string]Assignment, rev int64, out chan []Assignment) {
	defer close(out)
	publish := func() {
		set := make([]Assignment, 0, len(cur))
		for _, a := range cur {
			set = append(set, a)
		}
		select { // the latest set replaces one not taken yet
		case <-out:
		default:
		}
		out <- set
	}
	publish()
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		for wr := range f.st.Watch(wctx, f.keys.assignments(), rev+1) {
			if wr.Err != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == EventDelete {
					delete(cur, ev.KV.Key)
				} else if a, err := decode[Assignment]("assignment", ev.KV); err == nil {
					cur[ev.KV.Key] = a
				} else {
					delete(cur, ev.KV.Key)
				}
			}
			rev = wr.Rev
			publish()
		}
		cancel()
		// The watch ended: list again (after a pause, unless ctx ended).
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(followRetry):
			}
			next, r, err := f.listAssignments(ctx)
			if err == nil {
				cur, rev = next, r
				publish()
				break
			}
		}
	}
}
