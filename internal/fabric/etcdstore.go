package fabric

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// EtcdStore is the Store on a real etcd, embedded or external: the one code
// path both deployments run.
type EtcdStore struct {
	cli *clientv3.Client
}

// DialTimeout bounds how long Dial waits for the first answer from the
// cluster.
const DialTimeout = 5 * time.Second

// Dial connects to an etcd cluster (the embedded one's Endpoints(), or the
// --etcd-endpoints of an external cluster) and checks that it answers.
// tlsCfg may be nil for plain http endpoints; ClientTLS builds one from
// certificate files.
func Dial(endpoints []string, tlsCfg *tls.Config) (*EtcdStore, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("fabric: no etcd endpoints; pass --etcd-endpoints host:2379[,...] or leave it empty to run the embedded etcd")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		TLS:                  tlsCfg,
		DialTimeout:          DialTimeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("fabric: etcd client for %s: %w", strings.Join(endpoints, ","), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	defer cancel()
	if _, err := cli.Get(ctx, rootPrefix+"ping", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("fabric: etcd at %s does not answer (%w); check the endpoints, that the cluster has quorum, and the TLS options", strings.Join(endpoints, ","), err)
	}
	return &EtcdStore{cli: cli}, nil
}

// Client returns the underlying etcd client.
func (s *EtcdStore) Client() *clientv3.Client { return s.cli }

// Close implements Store.
func (s *EtcdStore) Close() error { return s.cli.Close() }

// etcdErr maps etcd's errors onto this package's.
func etcdErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: %v", ErrSessionLost, err)
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w: %v", ErrCompacted, err)
	}
	return err
}

func toKV(kv *mvccpb.KeyValue) KV {
	return KV{Key: string(kv.Key), Value: kv.Value, CreateRev: kv.CreateRevision, ModRev: kv.ModRevision, Lease: LeaseID(kv.Lease)}
}

// Get implements Store.
func (s *EtcdStore) Get(ctx context.Context, key string) (KV, error) {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return KV{}, etcdErr(err)
	}
	if len(resp.Kvs) == 0 {
		return KV{}, ErrNotFound
	}
	return toKV(resp.Kvs[0]), nil
}

// List implements Store.
func (s *EtcdStore) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, 0, etcdErr(err)
	}
	out := make([]KV, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = toKV(kv)
	}
	return out, resp.Header.Revision, nil
}

// Put implements Store.
func (s *EtcdStore) Put(ctx context.Context, key string, value []byte, lease LeaseID) (int64, error) {
	var opts []clientv3.OpOption
	if lease != NoLease {
		opts = append(opts, clientv3.WithLease(clientv3.LeaseID(lease)))
	}
	resp, err := s.cli.Put(ctx, key, string(value), opts...)
	if err != nil {
		return 0, etcdErr(err)
	}
	return resp.Header.Revision, nil
}

// Delete implements Store.
func (s *EtcdStore) Delete(ctx context.Context, key string) (int64, error) {
	resp, err := s.cli.Delete(ctx, key)
	if err != nil {
		return 0, etcdErr(err)
	}
	return resp.Header.Revision, nil
}

// Txn implements Store.
func (s *EtcdStore) Txn(ctx context.Context, conds []Cond, ops []Op) (int64, error) {
	cmps := make([]clientv3.Cmp, len(conds))
	for i, c := range conds {
		if c.Target == CmpCreate {
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(c.Key), "=", c.Rev)
		} else {
			cmps[i] = clientv3.Compare(clientv3.ModRevision(c.Key), "=", c.Rev)
		}
	}
	then := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		switch {
		case op.Delete:
			then[i] = clientv3.OpDelete(op.Key)
		case op.Lease != NoLease:
			then[i] = clientv3.OpPut(op.Key, string(op.Value), clientv3.WithLease(clientv3.LeaseID(op.Lease)))
		default:
			then[i] = clientv3.OpPut(op.Key, string(op.Value))
		}
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(then...).Commit()
	if err != nil {
		return 0, etcdErr(err)
	}
	if !resp.Succeeded {
		return resp.Header.Revision, ErrConflict
	}
	return resp.Header.Revision, nil
}

// Watch implements Store. It survives the loss of the etcd member it was
// talking to: the watch is re-established (from the next revision it has
// not delivered) on any member that has a leader, until ctx ends or the
// revision is compacted.
func (s *EtcdStore) Watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse {
	ch := make(chan WatchResponse)
	next := fromRev
	if next <= 0 {
		// "From now" is pinned to a revision, so that a re-established
		// watch misses nothing either.
		resp, err := s.cli.Get(ctx, rootPrefix, clientv3.WithCountOnly())
		if err != nil {
			go func() {
				defer close(ch)
				select {
				case ch <- WatchResponse{Err: etcdErr(err)}:
				case <-ctx.Done():
				}
			}()
			return ch
		}
		next = resp.Header.Revision + 1
	}
	go func() {
		defer close(ch)
		for ctx.Err() == nil {
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(next)}
			for wr := range s.cli.Watch(wctx, prefix, opts...) {
				if wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted) {
					cancel()
					select {
					case ch <- WatchResponse{Rev: wr.CompactRevision, Err: fmt.Errorf("%w: watch of %s from revision %d", ErrCompacted, prefix, next)}:
					case <-ctx.Done():
					}
					return
				}
				if wr.Err() != nil {
					break // no leader or a broken stream: watch again
				}
				if !s.deliver(ctx, ch, wr, &next) {
					cancel()
					return
				}
			}
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return ch
}

// deliver splits an etcd watch response into one WatchResponse per
// revision; it moves next past what it sent.
func (s *EtcdStore) deliver(ctx context.Context, ch chan<- WatchResponse, wr clientv3.WatchResponse, next *int64) bool {
	var cur WatchResponse
	flush := func() bool {
		if len(cur.Events) == 0 {
			return true
		}
		select {
		case ch <- cur:
			*next = cur.Rev + 1
			cur = WatchResponse{}
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, ev := range wr.Events {
		e := Event{KV: toKV(ev.Kv)}
		if ev.Type == mvccpb.DELETE {
			e.Type = EventDelete
			e.KV = KV{Key: string(ev.Kv.Key), ModRev: ev.Kv.ModRevision}
		} else {
			e.Type = EventPut
		}
		if ev.PrevKv != nil {
			e.Prev = ev.PrevKv.Value
		}
		if e.KV.ModRev < *next {
			continue // already delivered before a re-watch
		}
		if e.KV.ModRev != cur.Rev && !flush() {
			return false
		}
		cur.Rev = e.KV.ModRev
		cur.Events = append(cur.Events, e)
	}
	return flush()
}

// NewSession implements Store with a concurrency.Session.
func (s *EtcdStore) NewSession(ctx context.Context, ttl time.Duration) (Session, error) {
	secs := ttlSeconds(ttl)
	resp, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("fabric: grant a %d s lease: %w", secs, etcdErr(err))
	}
	cs, err := concurrency.NewSession(s.cli, concurrency.WithLease(resp.ID), concurrency.WithTTL(int(secs)))
	if err != nil {
		_, _ = s.cli.Revoke(context.Background(), resp.ID)
		return nil, fmt.Errorf("fabric: keep lease %x alive: %w", resp.ID, etcdErr(err))
	}
	return &etcdSession{s: cs, ttl: time.Duration(secs) * time.Second}, nil
}

type etcdSession struct {
	s   *concurrency.Session
	ttl time.Duration
}

func (e *etcdSession) Lease() LeaseID        { return LeaseID(e.s.Lease()) }
func (e *etcdSession) TTL() time.Duration    { return e.ttl }
func (e *etcdSession) Done() <-chan struct{} { return e.s.Done() }
func (e *etcdSession) Orphan()               { e.s.Orphan() }

func (e *etcdSession) Close() error {
	err := e.s.Close()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil // already expired
	}
	return err
}

// NewElection implements Store with a concurrency.Election; s must come
// from this EtcdStore.
func (s *EtcdStore) NewElection(sess Session, prefix string) Election {
	es := sess.(*etcdSession)
	return &etcdElection{cli: s.cli, sess: es, prefix: prefix, e: concurrency.NewElection(es.s, prefix)}
}

type etcdElection struct {
	cli    *clientv3.Client
	sess   *etcdSession
	prefix string
	e      *concurrency.Election
}

// ownKey is the session's key in the election, as concurrency.Election
// names it: <prefix>/<lease in hex>.
func (e *etcdElection) ownKey() string {
	return fmt.Sprintf("%s/%x", e.prefix, int64(e.sess.s.Lease()))
}

func (e *etcdElection) Key() string { return e.e.Key() }
func (e *etcdElection) Rev() int64  { return e.e.Rev() }

// Campaign implements Election. concurrency.Election.Campaign only waits
// for the keys before its own to go; if its own key went too (the lease
// expired meanwhile) it would still return nil, so the key is checked.
func (e *etcdElection) Campaign(ctx context.Context, value string) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-e.sess.Done():
			cancel()
		case <-cctx.Done():
		}
	}()
	if err := e.e.Campaign(cctx, value); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-e.sess.Done():
			return ErrSessionLost
		default:
		}
		return etcdErr(err)
	}
	resp, err := e.cli.Get(ctx, e.e.Key())
	if err != nil {
		return etcdErr(err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != e.e.Rev() {
		return ErrSessionLost
	}
	return nil
}

// Resign implements Election. concurrency.Election resigns only a key its
// Campaign learnt of; a campaign whose put the cluster applied but whose
// reply was lost (ctx ended in flight: "context canceled") left a key it
// does not know, so the session's key is deleted too. That put may even
// land after this delete (the cancelled request and the delete are not
// ordered): the candidacy's watch of the election withdraws such a key
// (Candidacy.strayKey).
func (e *etcdElection) Resign(ctx context.Context) error {
	if err := e.e.Resign(ctx); err != nil {
		return etcdErr(err)
	}
	_, err := e.cli.Delete(ctx, e.ownKey())
	return etcdErr(err)
}
