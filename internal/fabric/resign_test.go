package fabric

import (
	"context"
	"errors"
	"testing"
	"time"
)

// flakyElection fails its first resignations, as etcd does while a member
// is gone or a raft election runs.
type flakyElection struct {
	fails   int
	resigns int
}

func (e *flakyElection) Campaign(context.Context, string) error { return nil }
func (e *flakyElection) Key() string                            { return "k" }
func (e *flakyElection) Rev() int64                             { return 1 }
func (e *flakyElection) Resign(context.Context) error {
	e.resigns++
	if e.resigns <= e.fails {
		return errors.New("etcdserver: no leader")
	}
	return nil
}

type liveSession struct{ done chan struct{} }

func (s liveSession) Lease() LeaseID        { return 1 }
func (s liveSession) TTL() time.Duration    { return time.Minute }
func (s liveSession) Done() <-chan struct{} { return s.done }
func (s liveSession) Orphan()               {}
func (s liveSession) Close() error          { return nil }

// A resignation that fails is tried again until it succeeds: a key left
// behind would hold the role with nobody running the subnet manager.
func TestResignRetries(t *testing.T) {
	el := &flakyElection{fails: 2}
	c := &Candidacy{sess: liveSession{done: make(chan struct{})}}
	c.resign(el)
	if el.resigns != 3 {
		t.Fatalf("resigned %d times, want 3 (two failures, then success)", el.resigns)
	}
	// With the session gone, it gives up: the lease takes the key.
	el = &flakyElection{fails: 1 << 30}
	done := make(chan struct{})
	close(done)
	c = &Candidacy{sess: liveSession{done: done}}
	c.resign(el)
	if el.resigns != 1 {
		t.Fatalf("resigned %d times with the session gone, want 1", el.resigns)
	}
}
