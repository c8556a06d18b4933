package daemon

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/proto"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// switchDaemon starts a daemon on its own embedded switch.
func switchDaemon(t *testing.T, host string) *Daemon {
	t.Helper()
	dir := t.TempDir()
	d, err := New(Config{SocketPath: filepath.Join(dir, "s.sock"), StateDir: filepath.Join(dir, "state"), HostName: host,
		CMListen: "off",
		Switch: SwitchConfig{Enable: true, TCPListen: "127.0.0.1:0", TCPAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")},
			HostTTL: 2 * time.Second, Grace: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve()
	t.Cleanup(func() { d.Close() })
	return d
}

// waitUntil polls cond (a hang guard, not a timing check).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A daemon whose lease ends under it (etcd out of reach for longer than
// the TTL, here: revoked) registers its host again and stands again for
// the subnet manager.
func TestSwitchLeaseLost(t *testing.T) {
	d := switchDaemon(t, "h1")
	sw := d.sw
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hostUp := func() bool {
		_, err := sw.fab.Host(ctx, "h1")
		return err == nil
	}
	waitUntil(t, "h1 is registered", hostUp)
	waitUntil(t, "h1 holds the subnet manager", func() bool {
		c := sw.candidacy()
		return c != nil && c.Role() == fabric.Leader
	})
	sw.regMu.Lock()
	lease := sw.sess.Lease()
	sw.regMu.Unlock()
	if _, err := sw.store.Client().Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the lease loss is noticed", func() bool { return sw.leaseLost.Load() == 1 })
	waitUntil(t, "h1 is registered again, under a new lease", func() bool {
		sw.regMu.Lock()
		now := sw.sess.Lease()
		sw.regMu.Unlock()
		return now != lease && hostUp()
	})
	waitUntil(t, "h1 holds the subnet manager again", func() bool {
		c := sw.candidacy()
		return c != nil && c.Role() == fabric.Leader
	})
}

// Bad bodies for every switch command get a clear error, never an internal
// one, and the daemon goes on.
func TestSwitchCommandsBadInput(t *testing.T) {
	d := switchDaemon(t, "h2")
	s := &session{d: d}
	cmds := map[string]func(*session, []byte, []int) (any, []int, error){
		"portgroup_add": cmdPortGroupAdd, "portgroup_delete": cmdPortGroupDelete, "path": cmdPath,
	}
	bodies := []string{"", "{", "[]", "null", `{"name":""}`, `{"name":"x","vlan":5000}`, `{"name":"x","mtu":1000}`,
		`{"name":"x","pkey":32768}`, `{"name":"-x"}`, `{"name":"default"}`, `{"name":"nosuch"}`,
		`{"a":"","b":""}`, `{"a":"/vrdma0","b":"x"}`, `{"a":"x/vrdma99","b":"y"}`, `{"a":"x/rdma0","b":"y"}`, `{"a":"nosuch","b":"nosuch2"}`}
	for name, run := range cmds {
		for _, b := range bodies {
			_, _, err := run(s, []byte(b), nil)
			if err == nil {
				continue // some bodies are good for some commands
			}
			var pe *proto.Error
			if !errors.As(err, &pe) || pe.Code == proto.CodeInternal || pe.Message == "" {
				t.Errorf("%s %q: %v: want a clear, non-internal error", name, b, err)
			}
		}
	}
	for _, run := range []func(*session, []byte, []int) (any, []int, error){cmdSwitchShow, cmdPortGroupList, cmdHostList} {
		if _, _, err := run(s, []byte("garbage"), nil); err != nil {
			t.Errorf("a list command with a garbage body: %v; want the body ignored", err)
		}
	}
}

// A candidacy that ends while the lease lives is started again.
func TestSwitchCandidacyEnds(t *testing.T) {
	d := switchDaemon(t, "h3")
	sw := d.sw
	leader := func() bool {
		c := sw.candidacy()
		return c != nil && c.Role() == fabric.Leader
	}
	waitUntil(t, "h3 holds the subnet manager", leader)
	old := sw.candidacy()
	if err := old.Close(); err != nil { // as if its watch had failed for good
		t.Fatal(err)
	}
	waitUntil(t, "h3 stands again and holds the subnet manager", func() bool {
		return sw.candidacy() != old && leader()
	})
	if sw.leaseLost.Load() != 0 {
		t.Errorf("the lease was counted lost: the candidacy alone ended")
	}
}
