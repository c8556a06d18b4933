package daemon

import (
	"fmt"
	"sync"

	"github.com/vrdma/vrdma/internal/proto"
)

// The daemon counts what every tenant holds: per uid (whoever created the
// objects, whichever instance they are in) and per instance (whoever uses
// it). A request that would take an account past its limit is refused with
// CodeLimit before anything is created.

// account is what one uid or one instance holds, against its limits.
type account struct {
	what   string    // "uid 1000", "instance vm1": who is refused
	flag   string    // the daemon flag that raises its limits
	limits *limitSet // the ledger's user or instance limits
	used   limitSet
	refs   int      // sessions and instances that hold the account (users only)
	up     *account // charged along with this one: a uid's account is also the daemon's total
}

// ledger keeps the accounts. Its lock is taken last: nothing is called
// with it held.
//
// Every uid's account charges the daemon's total with it: what all tenants
// hold together, against limits of its own (--total-limit), so that many
// uids — subordinate uids of rootless containers appear as many, each with
// a fresh quota — cannot together take the host. An instance's account
// does not (what its sessions hold is their uids' too, and counted there).
type ledger struct {
	mu    sync.Mutex
	user  limitSet // every uid's limits
	inst  limitSet // every named instance's limits
	all   limitSet // all tenants' together
	users map[uint32]*account
	total *account // what all tenants hold together, against all
}

func newLedger(user, inst, all limitSet) *ledger {
	l := &ledger{user: user, inst: inst, all: all, users: make(map[uint32]*account)}
	l.total = &account{what: "the daemon (all tenants together)", flag: "--total-limit", limits: &l.all}
	return l
}

// join returns uid's account, created if need be, and holds it until
// leave: a session or an instance of uid's.
func (l *ledger) join(uid uint32) *account {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.users[uid]
	if a == nil {
		what := fmt.Sprintf("uid %d", uid)
		if uid == unknownUID {
			what = "a peer of unknown uid"
		}
		a = &account{what: what, flag: "--limit", limits: &l.user, up: l.total}
		l.users[uid] = a
	}
	a.refs++
	return a
}

// leave lets go of an account join returned; the last one forgets it.
func (l *ledger) leave(uid uint32, a *account) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.refs--; a.refs <= 0 && l.users[uid] == a {
		delete(l.users, uid)
	}
}

// instanceAccount returns a new account for the named instance.
func (l *ledger) instanceAccount(name string) *account {
	return &account{what: "instance " + name, flag: "--instance-limit", limits: &l.inst}
}

// charge adds n of r to every account given (nil ones are skipped), or,
// if that would take one past its limit, to none and says which. held,
// if not nil, counts what the caller holds, for release.
func (l *ledger) charge(held *limitSet, r Resource, n uint64, accts ...*account) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var buf [4]*account
	all := withUp(buf[:0], accts)
	for _, a := range all {
		if lim := a.limits[r]; a.used[r] > lim || n > lim-a.used[r] {
			return limitError(a, r, n)
		}
	}
	for _, a := range all {
		a.used[r] += n
	}
	if held != nil {
		held[r] += n
	}
	return nil
}

// withUp appends to out the accounts given (not the nil ones) and those
// charged with them, each once.
func withUp(out []*account, accts []*account) []*account {
	add := func(a *account) {
		for _, b := range out {
			if b == a {
				return
			}
		}
		out = append(out, a)
	}
	for _, a := range accts {
		if a != nil {
			add(a)
			if a.up != nil {
				add(a.up)
			}
		}
	}
	return out
}

// add adds n of r to a (and what is charged with it) without a limit: for
// what the daemon itself creates (the saved instances at start).
func (l *ledger) add(r Resource, n uint64, a *account) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var buf [2]*account
	for _, a := range withUp(buf[:0], []*account{a}) {
		a.used[r] += n
	}
}

// release gives back n of r to every account given; held as for charge,
// and if not nil, no more than it counts is given back (what a session
// gives back after its end, which gave back everything, is nothing).
// Giving back more than was taken is a bug: the count stops at zero.
func (l *ledger) release(held *limitSet, r Resource, n uint64, accts ...*account) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if held != nil {
		n = min(n, held[r])
	}
	var buf [4]*account
	for _, a := range withUp(buf[:0], accts) {
		a.used[r] -= min(n, a.used[r])
	}
	if held != nil {
		held[r] -= min(n, held[r])
	}
}

// releaseAll gives back everything held counts and zeroes it.
func (l *ledger) releaseAll(held *limitSet, accts ...*account) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var buf [4]*account
	all := withUp(buf[:0], accts)
	for r := range numResources {
		for _, a := range all {
			a.used[r] -= min(held[r], a.used[r])
		}
		held[r] = 0
	}
}

// used returns what uid holds (zero for a uid that holds nothing).
func (l *ledger) usedBy(uid uint32) limitSet {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.users[uid]; a != nil {
		return a.used
	}
	return limitSet{}
}

// usage returns a's counts.
func (l *ledger) usage(a *account) limitSet {
	l.mu.Lock()
	defer l.mu.Unlock()
	return a.used
}

// limitError is the refusal of n more of r for a: the limit, the count
// and how to raise it.
func limitError(a *account, r Resource, n uint64) error {
	lim := a.limits[r]
	if r == Locked {
		return proto.Errorf(proto.CodeLimit, "%s has %d bytes of registered memory locked and may lock %d (limit %s=%d): %d more would pass it; deregister regions, or have the daemon started with a higher `%s %s=BYTES`",
			a.what, a.used[r], lim, r, lim, n, a.flag, r)
	}
	if r == Ring {
		return proto.Errorf(proto.CodeLimit, "%s has queues of %d bytes (shared rings and the daemon's state of them) and may have %d (limit %s=%d): %d more would pass it; destroy some queue pairs, completion queues or shared receive queues, create smaller ones (fewer work requests, completions or scatter/gather entries), or have the daemon started with a higher `%s %s=BYTES`",
			a.what, a.used[r], lim, r, lim, n, a.flag, r)
	}
	fix := "destroy some"
	switch r {
	case Sessions:
		fix = "close some (every opened device and admin connection is one)"
	case Instances:
		fix = "delete some (`vrdma vm delete`)"
	case CMListeners:
		fix = "stop listening on some ports"
	case CMConns:
		fix = "disconnect or reject some (one counts until the process has read its last event)"
	case Mcast:
		fix = "detach some QPs from their groups (ibv_detach_mcast, rdma_leave_multicast)"
	}
	return proto.Errorf(proto.CodeLimit, "%s holds %d %s of %d allowed (limit %s=%d): %s, or have the daemon started with a higher `%s %s=N`",
		a.what, a.used[r], plural(r), lim, r, lim, fix, a.flag, r)
}

func plural(r Resource) string {
	switch r {
	case Sessions:
		return "sessions"
	case Instances:
		return "instances"
	case PDs:
		return "protection domains (pd)"
	case CQs:
		return "completion queues (cq)"
	case QPs:
		return "queue pairs (qp)"
	case MRs:
		return "memory regions (mr)"
	case MWs:
		return "memory windows (mw)"
	case Mcast:
		return "multicast attachments (mcast)"
	case SRQs:
		return "shared receive queues (srq)"
	case XRCDs:
		return "XRC domains (xrcd)"
	case AHs:
		return "address handles (ah)"
	case CMListeners:
		return "connection manager listeners (cmlisten)"
	case CMConns:
		return "connection manager connections (cmconn)"
	}
	return r.String()
}
