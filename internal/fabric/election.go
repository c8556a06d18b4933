package fabric

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// The subnet-manager role. One daemon of the switch holds it: it assigns
// adapter identifiers and QPN blocks (assign.go). Candidates stand with a
// priority, like OpenSM's (0–15, higher wins; equal priorities: the lower
// host name wins, as OpenSM's lower GUID does):
//
//  1. each candidate puts /vrdma/<sw>/sm/candidates/<host> = {host, priority}
//     under its session's lease and watches the candidates;
//  2. only the best live candidate campaigns in the etcd election
//     (concurrency.Election under /vrdma/<sw>/sm/election), so at most one
//     daemon holds the role, whatever the candidates believe;
//  3. a holder that sees a better candidate appear resigns (a restarted
//     higher-priority daemon takes the role back, as OpenSM's does);
//  4. when the holder's lease ends, its candidate and election keys go
//     together; the next best candidate campaigns and wins;
//  5. a new holder first re-validates every assignment (OpenSM's "coming
//     out of standby" full sweep), then keeps them up to date; each of its
//     writes is conditional on its election key, so a holder that lost the
//     role cannot write.

// MaxPriority is the highest subnet-manager priority.
const MaxPriority = 15

// Candidate is a daemon standing for the subnet-manager role.
type Candidate struct {
	Host     string `json:"host"`
	Priority int    `json:"priority"`
}

// better reports whether a should hold the role rather than b.
func (a Candidate) better(b Candidate) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return a.Host < b.Host
}

// bestCandidate returns the candidate that should hold the role.
func bestCandidate(cs []Candidate) (Candidate, bool) {
	if len(cs) == 0 {
		return Candidate{}, false
	}
	best := cs[0]
	for _, c := range cs[1:] {
		if c.better(best) {
			best = c
		}
	}
	return best, true
}

// Role is a candidate's standing.
type Role int

// Roles.
const (
	Standby Role = iota
	Leader
)

func (r Role) String() string {
	if r == Leader {
		return "leader"
	}
	return "standby"
}

// RoleChange reports a change of a candidate's role. Report is the
// re-validation the candidate ran on becoming leader. Err is set when the
// candidacy ended (the session was lost, or ctx ended).
type RoleChange struct {
	Role   Role
	Report Report
	Err    error
}

// Candidacy is one daemon standing for the subnet-manager role.
type Candidacy struct {
	f    *Fabric
	sess Session
	self Candidate
	cfg  SMConfig

	changes chan RoleChange
	done    chan struct{}
	cancel  context.CancelFunc

	mu   sync.Mutex
	role Role
	last Report
	err  error
}

// Campaign makes host a candidate for the subnet-manager role, under
// sess's lease, until ctx ends, Close is called, or the session is lost.
func (f *Fabric) Campaign(ctx context.Context, sess Session, host string, priority int, cfg SMConfig) (*Candidacy, error) {
	if err := ValidateName("host", host); err != nil {
		return nil, err
	}
	if priority < 0 || priority > MaxPriority {
		return nil, fmt.Errorf("%w: subnet-manager priority %d; use 0 (lowest) to %d (highest)", ErrInvalid, priority, MaxPriority)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	self := Candidate{Host: host, Priority: priority}
	if _, err := f.st.Put(ctx, f.keys.candidate(host), encode(self), sess.Lease()); err != nil {
		return nil, fmt.Errorf("fabric: stand %q for subnet manager: %w", host, err)
	}
	kvs, rev, err := f.st.List(ctx, f.keys.candidates())
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	c := &Candidacy{f: f, sess: sess, self: self, cfg: cfg,
		changes: make(chan RoleChange, 16), done: make(chan struct{}), cancel: cancel}
	go c.run(cctx, kvs, f.st.Watch(cctx, f.keys.candidates(), rev+1), f.st.Watch(cctx, f.keys.election()+"/", rev+1))
	return c, nil
}

// Changes reports role changes. It is buffered; a receiver that falls
// behind loses changes (Role is always current). It closes when the
// candidacy ends.
func (c *Candidacy) Changes() <-chan RoleChange { return c.changes }

// Role returns the candidate's current role.
func (c *Candidacy) Role() Role {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.role
}

// LastReport returns the subnet manager's last pass, if this candidate led.
func (c *Candidacy) LastReport() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// Done is closed when the candidacy has ended; Err then says why.
func (c *Candidacy) Done() <-chan struct{} { return c.done }

// Err returns why the candidacy ended (nil while it runs, or after Close).
func (c *Candidacy) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close withdraws the candidate: it resigns if it leads and removes its
// candidate record. It waits for the candidacy to end.
func (c *Candidacy) Close() error {
	c.cancel()
	<-c.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.f.st.Delete(ctx, c.f.keys.candidate(c.self.Host))
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	return err
}

func (c *Candidacy) setRole(r Role, rep *Report, err error) {
	c.mu.Lock()
	c.role = r
	if rep != nil {
		c.last = *rep
	}
	c.mu.Unlock()
	ch := RoleChange{Role: r, Err: err}
	if rep != nil {
		ch.Report = *rep
	}
	select {
	case c.changes <- ch:
	default:
	}
}

// run watches the candidates and starts or stops this one's campaign. It
// watches the election too (ech): a key of this session's that appears
// while no campaign of this candidate runs is withdrawn (strayKey).
func (c *Candidacy) run(ctx context.Context, kvs []KV, wch, ech <-chan WatchResponse) {
	cands := map[string]Candidate{}
	for _, kv := range kvs {
		if cd, err := decode[Candidate]("candidate", kv); err == nil {
			cands[nameOf(kv.Key)] = cd
		}
	}
	var (
		stop    context.CancelFunc
		stopped chan struct{}
		retry   <-chan time.Time
		endErr  error
	)
	halt := func() {
		if stop != nil {
			stop()
			<-stopped
			stop, stopped = nil, nil
		}
	}
	defer func() {
		halt()
		c.mu.Lock()
		c.err = endErr
		c.mu.Unlock()
		if endErr != nil {
			c.setRole(Standby, nil, endErr)
		}
		close(c.changes)
		close(c.done)
	}()
	c.standAgain(ctx, cands) // if our record went before the list was read
	for {
		list := make([]Candidate, 0, len(cands))
		for _, cd := range cands {
			list = append(list, cd)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Host < list[j].Host })
		best, _ := bestCandidate(list)
		if best.Host == c.self.Host && stop == nil && retry == nil {
			stop, stopped = c.start(ctx)
		} else if best.Host != c.self.Host {
			halt()
		}
		select {
		case <-ctx.Done():
			return
		case <-c.sess.Done():
			endErr = ErrSessionLost
			return
		case <-stopped:
			// The campaign ended on its own (an error): try again shortly.
			stop, stopped = nil, nil
			retry = time.After(200 * time.Millisecond)
		case <-retry:
			retry = nil
		case wr, ok := <-ech:
			if !ok {
				ech = nil // the candidates' watch ends the candidacy
				continue
			}
			if stop == nil && c.strayKey(wr) {
				c.withdrawStray(ctx)
			}
		case wr, ok := <-wch:
			if !ok {
				return
			}
			if wr.Err != nil {
				endErr = wr.Err
				return
			}
			for _, ev := range wr.Events {
				name := nameOf(ev.KV.Key)
				if ev.Type == EventDelete {
					delete(cands, name)
				} else if cd, err := decode[Candidate]("candidate", ev.KV); err == nil {
					cands[name] = cd
				}
			}
			c.standAgain(ctx, cands)
		}
	}
}

// strayKey reports whether an election watch response puts a key under
// this candidacy's lease. With no campaign running, that is the put of a
// campaign whose ctx ended while its request was in flight: the cluster
// may apply it after the resignation's delete (a cancelled request and a
// later one are not ordered), and the key would then lead the election,
// this candidate standing by and the better one waiting behind it, until
// the lease ends.
func (c *Candidacy) strayKey(wr WatchResponse) bool {
	for _, ev := range wr.Events {
		if ev.Type != EventDelete && ev.KV.Lease == c.sess.Lease() {
			return true
		}
	}
	return false
}

// withdrawStray deletes this session's election key, once: a failure is
// left to the lease (the run loop must not wait on etcd for long).
func (c *Candidacy) withdrawStray(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = c.f.st.NewElection(c.sess, c.f.keys.election()).Resign(rctx)
}

// resign gives the role up. It tries again while etcd cannot answer (a
// member gone, a raft election under way) and the session lives: an
// election key left behind would keep the role from every better
// candidate, with nobody running the subnet manager, until the lease ends.
func (c *Candidacy) resign(el Election) {
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := el.Resign(rctx)
		cancel()
		if err == nil || errors.Is(err, ErrClosed) {
			return
		}
		select {
		case <-c.sess.Done():
			return // the lease ends: the key goes with it
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)):
		}
	}
}

// standAgain puts our candidate record back if it is missing from cands:
// the lease ended, or someone (a candidacy of ours that was closed just
// before this one began) deleted it. Nothing happens once the session is
// gone.
func (c *Candidacy) standAgain(ctx context.Context, cands map[string]Candidate) {
	if _, ok := cands[c.self.Host]; ok {
		return
	}
	select {
	case <-c.sess.Done():
	default:
		if _, err := c.f.st.Put(ctx, c.f.keys.candidate(c.self.Host), encode(c.self), c.sess.Lease()); err == nil {
			cands[c.self.Host] = c.self
		}
	}
}

// start runs hold in the background.
func (c *Candidacy) start(ctx context.Context) (context.CancelFunc, chan struct{}) {
	cctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go c.hold(cctx, stopped)
	return cancel, stopped
}

// hold campaigns, and while elected runs the subnet manager; on the way out
// it resigns.
func (c *Candidacy) hold(ctx context.Context, stopped chan struct{}) {
	defer close(stopped)
	el := c.f.st.NewElection(c.sess, c.f.keys.election())
	if err := el.Campaign(ctx, string(encode(c.self))); err != nil {
		// Its key may be there all the same (the put landed, the reply
		// was lost when ctx ended because a better candidate appeared):
		// left behind, it would lead the election while this candidate
		// stands by, and keep the better one waiting behind it.
		c.resign(el)
		return
	}
	defer func() {
		c.resign(el)
		c.setRole(Standby, nil, nil)
	}()
	sm := &subnetManager{f: c.f, el: el, cfg: c.cfg}
	rep, rev, err := sm.reconcile(ctx)
	if err != nil {
		return
	}
	c.setRole(Leader, &rep, nil)
	for ctx.Err() == nil {
		if rev, err = sm.follow(ctx, rev, func(r Report) {
			c.mu.Lock()
			c.last = r
			c.mu.Unlock()
		}); err != nil {
			return
		}
	}
}

// LeaderInfo says who holds the subnet-manager role.
type LeaderInfo struct {
	Candidate
	// Rev is the create revision of the holder's election key: it changes
	// with every new term.
	Rev int64
}

// leaderOf returns the election key with the lowest create revision.
func leaderOf(kvs []KV) (LeaderInfo, bool) {
	var best *KV
	for i := range kvs {
		if best == nil || kvs[i].CreateRev < best.CreateRev {
			best = &kvs[i]
		}
	}
	if best == nil {
		return LeaderInfo{}, false
	}
	cd, err := decode[Candidate]("leader", *best)
	if err != nil {
		return LeaderInfo{}, false
	}
	return LeaderInfo{Candidate: cd, Rev: best.CreateRev}, true
}

// Leader returns the current subnet manager, or ErrNoLeader.
func (f *Fabric) Leader(ctx context.Context) (LeaderInfo, error) {
	kvs, _, err := f.st.List(ctx, f.keys.election()+"/")
	if err != nil {
		return LeaderInfo{}, err
	}
	li, ok := leaderOf(kvs)
	if !ok {
		return LeaderInfo{}, ErrNoLeader
	}
	return li, nil
}

// ObserveLeader reports the subnet manager each time it changes (a zero
// LeaderInfo when there is none), starting with the current state, until
// ctx ends.
func (f *Fabric) ObserveLeader(ctx context.Context) (<-chan LeaderInfo, error) {
	prefix := f.keys.election() + "/"
	kvs, rev, err := f.st.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	ch := make(chan LeaderInfo, 1)
	keys := map[string]KV{}
	for _, kv := range kvs {
		keys[kv.Key] = kv
	}
	wch := f.st.Watch(ctx, prefix, rev+1)
	go func() {
		defer close(ch)
		var last LeaderInfo
		first := true
		for {
			all := make([]KV, 0, len(keys))
			for _, kv := range keys {
				all = append(all, kv)
			}
			li, _ := leaderOf(all)
			if first || li != last {
				select {
				case ch <- li:
				case <-ctx.Done():
					return
				}
				first, last = false, li
			}
			wr, ok := <-wch
			if !ok || wr.Err != nil {
				return
			}
			for _, ev := range wr.Events {
				if ev.Type == EventDelete {
					delete(keys, ev.KV.Key)
				} else {
					keys[ev.KV.Key] = ev.KV
				}
			}
		}
	}()
	return ch, nil
}

// SMState lists, for diagnosis, the candidates and every key in the
// election (the first one leads), oldest first.
func (f *Fabric) SMState(ctx context.Context) (cands []Candidate, keys []LeaderInfo, err error) {
	ckvs, _, err := f.st.List(ctx, f.keys.candidates())
	if err != nil {
		return nil, nil, err
	}
	for _, kv := range ckvs {
		if cd, err := decode[Candidate]("candidate", kv); err == nil {
			cands = append(cands, cd)
		}
	}
	ekvs, _, err := f.st.List(ctx, f.keys.election()+"/")
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(ekvs, func(i, j int) bool { return ekvs[i].CreateRev < ekvs[j].CreateRev })
	for _, kv := range ekvs {
		if cd, err := decode[Candidate]("election key", kv); err == nil {
			keys = append(keys, LeaderInfo{Candidate: cd, Rev: kv.CreateRev})
		}
	}
	return cands, keys, nil
}
