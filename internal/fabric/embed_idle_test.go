package fabric

import (
	"context"
	"testing"
	"time"
)

// An idle single-node member wakes as seldom as raft and the switch's
// lease TTLs allow (docs/design/idle-daemon.md): its timers are the slow
// single-node ones, while a multi-member cluster keeps what it is given.
func TestEmbeddedIdleTimers(t *testing.T) {
	tests := []struct {
		name               string
		opts               EmbedOptions
		wantTick, wantElec time.Duration
	}{
		{"single node, defaults", EmbedOptions{}, SingleHeartbeat, SingleElection},
		{"single node, timers given", EmbedOptions{Heartbeat: 50 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond}, 50 * time.Millisecond, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.UnsafeNoFsync = true
			m, err := StartEmbedded(t.TempDir(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			cfg := m.e.Config()
			if got := time.Duration(cfg.TickMs) * time.Millisecond; got != tt.wantTick {
				t.Errorf("heartbeat %v, want %v", got, tt.wantTick)
			}
			if got := time.Duration(cfg.ElectionMs) * time.Millisecond; got != tt.wantElec {
				t.Errorf("election timeout %v, want %v", got, tt.wantElec)
			}
			if cfg.BackendBatchInterval != BackendBatchInterval {
				t.Errorf("backend batch interval %v, want %v", cfg.BackendBatchInterval, BackendBatchInterval)
			}
		})
	}
}

// The slower single-node timers lengthen no lease: etcd raises a TTL
// below 1.5 election timeouts to that, and the member's leases of 1 s and
// of MinTTL keep the TTL asked for, so a host whose daemon stops is still
// gone after its own TTL.
func TestEmbeddedLeaseTTLNotRaised(t *testing.T) {
	_, st := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, ttl := range []int64{1, int64(MinTTL / time.Second), int64(DefaultHostTTL / time.Second)} {
		g, err := st.Client().Grant(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if g.TTL != ttl {
			t.Errorf("a lease of %d s was granted %d s: the member's election timeout raises short leases", ttl, g.TTL)
		}
		if _, err := st.Client().Revoke(ctx, g.ID); err != nil {
			t.Fatal(err)
		}
	}
}
