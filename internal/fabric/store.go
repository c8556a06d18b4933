package fabric

import (
	"context"
	"time"
)

// Store is the small key-value interface the switch runs on: etcd's data
// model (revisions, leases, prefix watches, compare-and-set transactions,
// elections) and nothing more. EtcdStore implements it with the etcd v3
// client — for the embedded single node and an external cluster alike —
// and MemStore in memory for unit tests, with the same semantics.
type Store interface {
	// Get returns the key, or ErrNotFound.
	Get(ctx context.Context, key string) (KV, error)
	// List returns every key under prefix, sorted, and the store revision
	// the list was read at (watch from rev+1 to see what follows).
	List(ctx context.Context, prefix string) (kvs []KV, rev int64, err error)
	// Put writes key; with a lease other than NoLease the key is deleted
	// when the lease ends. It returns the revision of the write.
	Put(ctx context.Context, key string, value []byte, lease LeaseID) (rev int64, err error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) (rev int64, err error)
	// Txn applies ops atomically if every condition holds; otherwise it
	// applies nothing and returns ErrConflict.
	Txn(ctx context.Context, conds []Cond, ops []Op) (rev int64, err error)
	// Watch reports every change under prefix from revision fromRev on
	// (0: from now), one response per revision, in revision order. The
	// channel closes when ctx ends, or after a response carrying Err.
	Watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse
	// NewSession grants a lease of the given TTL (rounded up to whole
	// seconds, at least MinTTL) and keeps it alive until the session is
	// closed (the lease is revoked) or orphaned (it expires after its TTL).
	NewSession(ctx context.Context, ttl time.Duration) (Session, error)
	// NewElection returns an election under prefix whose candidate key is
	// bound to s's lease.
	NewElection(s Session, prefix string) Election
	// Close releases the store's connections (not its sessions' leases).
	Close() error
}

// LeaseID names a lease; NoLease means none.
type LeaseID int64

// NoLease is the zero LeaseID: a key put without a lease lives until deleted.
const NoLease LeaseID = 0

// MinTTL is the shortest lease TTL: etcd rounds TTLs to whole seconds and
// raises shorter ones to its minimum (1.5 election timeouts, 2 s by default).
const MinTTL = 2 * time.Second

// ttlSeconds rounds a TTL up to whole seconds, at least MinTTL.
func ttlSeconds(ttl time.Duration) int64 {
	if ttl < MinTTL {
		ttl = MinTTL
	}
	return int64((ttl + time.Second - 1) / time.Second)
}

// KV is one key with its value and revisions.
type KV struct {
	Key       string
	Value     []byte
	CreateRev int64 // revision that created the key
	ModRev    int64 // revision of the last write
	Lease     LeaseID
}

// EventType says what happened to a key.
type EventType int

// Event types.
const (
	EventPut EventType = iota + 1
	EventDelete
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// Event is one change to one key. Prev is the value before (nil if the key
// was new); for a delete, KV has only Key and ModRev.
type Event struct {
	Type EventType
	KV   KV // for a delete: Key and ModRev (the deleting revision)
	Prev []byte
}

// WatchResponse is a batch of events of one revision, or an error after
// which the channel closes.
type WatchResponse struct {
	Rev    int64
	Events []Event
	Err    error
}

// CmpTarget selects what a Cond compares.
type CmpTarget int

// Compare targets.
const (
	CmpMod    CmpTarget = iota // the key's last-modification revision
	CmpCreate                  // the key's creation revision
)

// Cond is a transaction condition: the key's revision (CmpMod or
// CmpCreate) equals Rev. Rev 0 means "the key does not exist".
type Cond struct {
	Key    string
	Target CmpTarget
	Rev    int64
}

// Absent is the condition that key does not exist.
func Absent(key string) Cond { return Cond{Key: key} }

// Unchanged is the condition that key was last modified at rev (0: absent).
func Unchanged(key string, rev int64) Cond { return Cond{Key: key, Rev: rev} }

// Op is one write in a transaction.
type Op struct {
	Delete bool
	Key    string
	Value  []byte
	Lease  LeaseID
}

// PutOp writes key.
func PutOp(key string, value []byte, lease LeaseID) Op {
	return Op{Key: key, Value: value, Lease: lease}
}

// DeleteOp removes key.
func DeleteOp(key string) Op { return Op{Delete: true, Key: key} }

// Session is a lease kept alive in the background.
type Session interface {
	Lease() LeaseID
	TTL() time.Duration
	// Done is closed when the lease is no longer kept alive: it expired, was
	// revoked, or the session was closed or orphaned.
	Done() <-chan struct{}
	// Orphan stops the keepalive without revoking: the lease, and every key
	// under it, ends TTL later (what a crashed daemon looks like).
	Orphan()
	// Close stops the keepalive and revokes the lease now.
	Close() error
}

// Election is etcd's leader election (concurrency.Election): candidates put
// a key under <prefix>/ with their lease; the live key with the lowest
// create revision is the leader. Who leads can be read by anyone from the
// keys alone (Fabric.Leader, Fabric.ObserveLeader), without a session.
type Election interface {
	// Campaign puts the candidate key with value and blocks until it is the
	// leader, ctx ends, or the session is lost (ErrSessionLost). When it
	// fails, its key may still be there (a put the cluster applied whose
	// reply was lost when ctx ended): Resign withdraws it.
	Campaign(ctx context.Context, value string) error
	// Resign withdraws the session's candidate key under the prefix (and
	// so the leadership), whether or not a Campaign learnt of it.
	Resign(ctx context.Context) error
	// Key and Rev are this candidate's election key and its create
	// revision after a successful Campaign: writes that only the leader may
	// make are guarded with Cond{Key, CmpCreate, Rev}.
	Key() string
	Rev() int64
}
