package fabric

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemStore is an in-memory Store for unit tests with etcd's semantics:
// one revision per write or transaction, create/mod revisions, prefix
// watches from any past revision (it keeps the whole history), leases that
// expire on its Clock, and elections decided by lowest create revision.
// Its sessions never lose their lease while open; Orphan starts the TTL,
// which a FakeClock's Advance then runs out.
type MemStore struct {
	clock Clock

	mu        sync.Mutex
	rev       int64
	kvs       map[string]*KV
	history   []Event // every event, in revision order
	changed   chan struct{}
	leases    map[LeaseID]*memLease
	nextLease LeaseID
	closed    bool
}

type memLease struct {
	id    LeaseID
	ttl   time.Duration
	keys  map[string]struct{}
	timer Timer         // armed once orphaned
	done  chan struct{} // closed when the lease ends or keepalive stops
	ended bool
}

// NewMemStore returns an empty MemStore whose leases run on clock (nil:
// the wall clock).
func NewMemStore(clock Clock) *MemStore {
	if clock == nil {
		clock = RealClock{}
	}
	return &MemStore{
		clock:   clock,
		kvs:     map[string]*KV{},
		changed: make(chan struct{}),
		leases:  map[LeaseID]*memLease{},
	}
}

// Rev returns the current revision.
func (m *MemStore) Rev() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rev
}

// commitLocked ends a revision: it records events and wakes waiters.
func (m *MemStore) commitLocked(evs []Event) {
	m.history = append(m.history, evs...)
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *MemStore) putLocked(key string, value []byte, lease LeaseID) Event {
	kv, ok := m.kvs[key]
	var prev []byte
	if ok {
		prev = kv.Value
	}
	if !ok {
		kv = &KV{Key: key, CreateRev: m.rev}
		m.kvs[key] = kv
	} else if kv.Lease != NoLease && kv.Lease != lease {
		if l := m.leases[kv.Lease]; l != nil {
			delete(l.keys, key)
		}
	}
	kv.Value = append([]byte(nil), value...)
	kv.ModRev = m.rev
	kv.Lease = lease
	if l := m.leases[lease]; l != nil {
		l.keys[key] = struct{}{}
	}
	return Event{Type: EventPut, KV: *kv, Prev: prev}
}

func (m *MemStore) deleteLocked(key string) (Event, bool) {
	kv, ok := m.kvs[key]
	if !ok {
		return Event{}, false
	}
	delete(m.kvs, key)
	if l := m.leases[kv.Lease]; l != nil {
		delete(l.keys, key)
	}
	return Event{Type: EventDelete, KV: KV{Key: key, ModRev: m.rev}, Prev: kv.Value}, true
}

func (m *MemStore) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.closed {
		return ErrClosed
	}
	return nil
}

// Get implements Store.
func (m *MemStore) Get(ctx context.Context, key string) (KV, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return KV{}, err
	}
	kv, ok := m.kvs[key]
	if !ok {
		return KV{}, ErrNotFound
	}
	return *kv, nil
}

// List implements Store.
func (m *MemStore) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, 0, err
	}
	var out []KV
	for k, kv := range m.kvs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, *kv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, m.rev, nil
}

// Put implements Store.
func (m *MemStore) Put(ctx context.Context, key string, value []byte, lease LeaseID) (int64, error) {
	return m.Txn(ctx, nil, []Op{PutOp(key, value, lease)})
}

// Delete implements Store.
func (m *MemStore) Delete(ctx context.Context, key string) (int64, error) {
	return m.Txn(ctx, nil, []Op{DeleteOp(key)})
}

// Txn implements Store.
func (m *MemStore) Txn(ctx context.Context, conds []Cond, ops []Op) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	for _, c := range conds {
		var got int64
		if kv, ok := m.kvs[c.Key]; ok {
			got = kv.ModRev
			if c.Target == CmpCreate {
				got = kv.CreateRev
			}
		}
		if got != c.Rev {
			return m.rev, ErrConflict
		}
	}
	for _, op := range ops {
		if !op.Delete && op.Lease != NoLease {
			if m.leases[op.Lease] == nil {
				return m.rev, ErrSessionLost
			}
		}
	}
	// etcd does not bump the revision for a transaction that changes nothing.
	m.rev++
	var evs []Event
	for _, op := range ops {
		if op.Delete {
			if ev, ok := m.deleteLocked(op.Key); ok {
				evs = append(evs, ev)
			}
			continue
		}
		evs = append(evs, m.putLocked(op.Key, op.Value, op.Lease))
	}
	if len(evs) == 0 {
		m.rev--
		return m.rev, nil
	}
	m.commitLocked(evs)
	return m.rev, nil
}

// Watch implements Store.
func (m *MemStore) Watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse {
	ch := make(chan WatchResponse)
	m.mu.Lock()
	if fromRev <= 0 {
		fromRev = m.rev + 1
	}
	m.mu.Unlock()
	go func() {
		defer close(ch)
		next := fromRev
		for {
			m.mu.Lock()
			if m.closed {
				m.mu.Unlock()
				return
			}
			var batches []WatchResponse
			i := sort.Search(len(m.history), func(i int) bool { return m.history[i].KV.ModRev >= next })
			for ; i < len(m.history); i++ {
				ev := m.history[i]
				if !strings.HasPrefix(ev.KV.Key, prefix) {
					continue
				}
				if n := len(batches); n > 0 && batches[n-1].Rev == ev.KV.ModRev {
					batches[n-1].Events = append(batches[n-1].Events, ev)
				} else {
					batches = append(batches, WatchResponse{Rev: ev.KV.ModRev, Events: []Event{ev}})
				}
			}
			next = m.rev + 1
			wake := m.changed
			m.mu.Unlock()
			for _, b := range batches {
				select {
				case ch <- b:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// NewSession implements Store. The lease lives until Close or, after
// Orphan, its TTL on the store's clock.
func (m *MemStore) NewSession(ctx context.Context, ttl time.Duration) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	m.nextLease++
	l := &memLease{
		id:   m.nextLease + 0x7e570000, // recognisable, like etcd's large IDs
		ttl:  time.Duration(ttlSeconds(ttl)) * time.Second,
		keys: map[string]struct{}{},
		done: make(chan struct{}),
	}
	m.leases[l.id] = l
	return &memSession{m: m, l: l}, nil
}

// expire ends lease id: its keys are deleted in one revision.
func (m *MemStore) expire(id LeaseID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[id]
	if l == nil {
		return
	}
	delete(m.leases, id)
	if !l.ended {
		l.ended = true
		close(l.done)
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	if len(l.keys) == 0 {
		return
	}
	keys := make([]string, 0, len(l.keys))
	for k := range l.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m.rev++
	evs := make([]Event, 0, len(keys))
	for _, k := range keys {
		if ev, ok := m.deleteLocked(k); ok {
			evs = append(evs, ev)
		}
	}
	m.commitLocked(evs)
}

// Close implements Store: watches end, later calls fail with ErrClosed.
func (m *MemStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		close(m.changed)
		m.changed = make(chan struct{})
	}
	return nil
}

type memSession struct {
	m    *MemStore
	l    *memLease
	once sync.Once
}

func (s *memSession) Lease() LeaseID        { return s.l.id }
func (s *memSession) TTL() time.Duration    { return s.l.ttl }
func (s *memSession) Done() <-chan struct{} { return s.l.done }

// Orphan stops keeping the lease alive: it expires TTL later on the clock.
func (s *memSession) Orphan() {
	s.once.Do(func() {
		m := s.m
		m.mu.Lock()
		defer m.mu.Unlock()
		if s.l.ended {
			return
		}
		s.l.ended = true
		close(s.l.done)
		id := s.l.id
		s.l.timer = m.clock.AfterFunc(s.l.ttl, func() { m.expire(id) })
	})
}

// Close revokes the lease now.
func (s *memSession) Close() error {
	s.Orphan()
	s.m.expire(s.l.id)
	return nil
}
