package fabric

import (
	"context"
	"fmt"
	"strings"
)

// memElection is MemStore's Election, with concurrency.Election's rules:
// the candidate key is <prefix>/<lease in hex>, created under the session's
// lease; the live key with the lowest create revision leads.
type memElection struct {
	m      *MemStore
	s      *memSession
	prefix string // ends in '/'
	key    string
	rev    int64
}

// NewElection implements Store; s must come from this MemStore.
func (m *MemStore) NewElection(s Session, prefix string) Election {
	return &memElection{m: m, s: s.(*memSession), prefix: prefix + "/"}
}

func (e *memElection) Key() string { return e.key }
func (e *memElection) Rev() int64  { return e.rev }

// firstLocked returns the key under the prefix with the lowest create revision.
func (e *memElection) firstLocked() (KV, bool) {
	var best *KV
	for k, kv := range e.m.kvs {
		if strings.HasPrefix(k, e.prefix) && (best == nil || kv.CreateRev < best.CreateRev) {
			best = kv
		}
	}
	if best == nil {
		return KV{}, false
	}
	return *best, true
}

// Campaign implements Election.
func (e *memElection) Campaign(ctx context.Context, value string) error {
	key := fmt.Sprintf("%s%x", e.prefix, int64(e.s.Lease()))
	m := e.m
	m.mu.Lock()
	if err := m.check(ctx); err != nil {
		m.mu.Unlock()
		return err
	}
	if m.leases[e.s.Lease()] == nil {
		m.mu.Unlock()
		return ErrSessionLost
	}
	if kv, ok := m.kvs[key]; !ok || string(kv.Value) != value {
		m.rev++
		m.commitLocked([]Event{m.putLocked(key, []byte(value), e.s.Lease())})
	}
	e.key, e.rev = key, m.kvs[key].CreateRev
	m.mu.Unlock()
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return ErrClosed
		}
		kv, ok := m.kvs[key]
		if !ok || kv.CreateRev != e.rev {
			m.mu.Unlock()
			e.key, e.rev = "", 0
			return ErrSessionLost
		}
		if first, _ := e.firstLocked(); first.Key == key {
			m.mu.Unlock()
			return nil
		}
		wake := m.changed
		m.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			_ = e.Resign(context.Background())
			return ctx.Err()
		case <-e.s.Done():
			_ = e.Resign(context.Background())
			return ErrSessionLost
		}
	}
}

// Resign implements Election: it deletes the session's key, which a
// campaign that failed may have left.
func (e *memElection) Resign(ctx context.Context) error {
	_, err := e.m.Delete(ctx, fmt.Sprintf("%s%x", e.prefix, int64(e.s.Lease())))
	e.key, e.rev = "", 0
	return err
}
