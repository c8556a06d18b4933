package fabric

import (
	"context"
	"fmt"
	"testing"
)

// lostReplyStore is a MemStore whose elections for one session lose the
// reply to their campaign: the key is put, then Campaign waits for its ctx
// to end and returns its error, as etcd's client does for a request the
// cluster applied while the caller gave up (concurrency.Election then
// does not know its own key).
type lostReplyStore struct {
	*MemStore
	lossy LeaseID
}

func (s *lostReplyStore) NewElection(sess Session, prefix string) Election {
	el := s.MemStore.NewElection(sess, prefix)
	if sess.Lease() != s.lossy {
		return el
	}
	return &lostReplyElection{Election: el, m: s.MemStore, key: fmt.Sprintf("%s/%x", prefix, int64(sess.Lease())), lease: sess.Lease()}
}

type lostReplyElection struct {
	Election
	m     *MemStore
	key   string
	lease LeaseID
}

func (e *lostReplyElection) Campaign(ctx context.Context, value string) error {
	if _, err := e.m.Put(ctx, e.key, []byte(value), e.lease); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

// A candidate whose campaign failed after its key was put (the holder
// stood down for a better candidate while the reply was in flight) must
// withdraw that key: otherwise it leads the election while standing by,
// the better candidate waits behind it, and nobody runs the subnet manager
// until the first one's lease ends (in TestSwitchThreeHosts: "the subnet
// manager stays on b" with b standing by and a's key second).
func TestCandidacyWithdrawsALostCampaign(t *testing.T) {
	m := NewMemStore(nil)
	ctx := ctxT(t)
	sb, _ := m.NewSession(ctx, MinTTL)
	sa, _ := m.NewSession(ctx, MinTTL)
	st := &lostReplyStore{MemStore: m, lossy: sb.Lease()}
	f := setupSwitch(t, st)
	b, err := f.Campaign(ctx, sb, "b", 2, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	waitElectionKeys(t, f, 1) // b's campaign put its key, and waits for the reply
	a, err := f.Campaign(ctx, sa, "a", 3, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	waitRole(t, a, Leader)
	if li, err := f.Leader(ctx); err != nil || li.Host != "a" {
		t.Fatalf("leader %+v, %v; want a", li, err)
	}
}

// waitElectionKeys waits until the election holds n keys.
func waitElectionKeys(t *testing.T, f *Fabric, n int) {
	t.Helper()
	ch, err := f.ObserveLeader(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for range ch {
		if _, keys, err := f.SMState(ctxT(t)); err == nil && len(keys) >= n {
			return
		}
	}
	t.Fatal("the election's keys never came")
}

// lateReplyStore is a MemStore whose elections for one session lose their
// campaign's request in flight and apply it late: Campaign returns its
// ctx's error with no key put, and the put lands after the resignation's
// delete (a cancelled request and a later one are not ordered in etcd).
// The other sessions' campaigns wait for that put (landed), so that the
// late key is first in the election, as the one it races with.
type lateReplyStore struct {
	*MemStore
	late   LeaseID
	landed chan struct{}
}

func (s *lateReplyStore) NewElection(sess Session, prefix string) Election {
	el := s.MemStore.NewElection(sess, prefix)
	if sess.Lease() != s.late {
		return afterLanded{Election: el, landed: s.landed}
	}
	return &lateReplyElection{Election: el, m: s.MemStore, key: fmt.Sprintf("%s/%x", prefix, int64(sess.Lease())), lease: sess.Lease(), landed: s.landed}
}

// afterLanded campaigns once the late put has landed.
type afterLanded struct {
	Election
	landed chan struct{}
}

func (e afterLanded) Campaign(ctx context.Context, value string) error {
	select {
	case <-e.landed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return e.Election.Campaign(ctx, value)
}

type lateReplyElection struct {
	Election
	m       *MemStore
	key     string
	lease   LeaseID
	pending string // the value of a campaign whose put is still in flight
	landed  chan struct{}
}

func (e *lateReplyElection) Campaign(ctx context.Context, value string) error {
	e.pending = value
	<-ctx.Done()
	return ctx.Err()
}

func (e *lateReplyElection) Resign(ctx context.Context) error {
	err := e.Election.Resign(ctx)
	if e.pending != "" {
		_, _ = e.m.Put(ctx, e.key, []byte(e.pending), e.lease) // lands after the delete
		e.pending = ""
		close(e.landed)
	}
	return err
}

// A campaign's put that lands after its resignation (the campaign gave up
// for a better candidate while its request was in flight) is withdrawn
// too: otherwise it leads the election, the better candidate waits behind
// it, and nobody runs the subnet manager until the first one's lease ends.
func TestCandidacyWithdrawsALateCampaign(t *testing.T) {
	m := NewMemStore(nil)
	ctx := ctxT(t)
	sb, _ := m.NewSession(ctx, MinTTL)
	sa, _ := m.NewSession(ctx, MinTTL)
	st := &lateReplyStore{MemStore: m, late: sb.Lease(), landed: make(chan struct{})}
	f := setupSwitch(t, st)
	b, err := f.Campaign(ctx, sb, "b", 2, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := f.Campaign(ctx, sa, "a", 3, SMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	waitRole(t, a, Leader)
	if li, err := f.Leader(ctx); err != nil || li.Host != "a" {
		t.Fatalf("leader %+v, %v; want a", li, err)
	}
}
