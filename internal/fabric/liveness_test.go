package fabric

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// nextHost receives one host event.
func nextHost(t *testing.T, ch <-chan HostEvent) HostEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("host watch closed")
		}
		return ev
	case <-time.After(hang):
		t.Fatal("no host event")
	}
	return HostEvent{}
}

func wantHost(t *testing.T, ch <-chan HostEvent, typ HostEventType, name string) HostEvent {
	t.Helper()
	ev := nextHost(t, ch)
	if ev.Type != typ || ev.Host.Name != name || ev.Err != nil {
		t.Fatalf("got %v %s (%v), want %v %s", ev.Type, ev.Host.Name, ev.Err, typ, name)
	}
	return ev
}

func testHostLiveness(t *testing.T, e storeEnv) {
	ctx := ctxT(t)
	f := setupSwitch(t, e.st)
	h1, h2 := testHost(), testHost()
	h2.Name, h2.Identity.MachineID = "h2", "m2"
	s1, _ := e.st.NewSession(ctx, MinTTL)
	defer s1.Close()
	s2, _ := e.st.NewSession(ctx, MinTTL)
	defer s2.Close()
	for _, r := range []struct {
		h Host
		s Session
	}{{h1, s1}, {h2, s2}} {
		if err := f.RegisterHost(ctx, r.h, r.s); err != nil {
			t.Fatal(err)
		}
	}
	// Another machine cannot take a live host's name.
	thief := h1
	thief.Identity.MachineID = "m9"
	if err := f.RegisterHost(ctx, thief, s2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("another machine registered h1: %v", err)
	}
	thief = h1
	thief.Identity.NetNS = "net:[2]"
	if err := f.RegisterHost(ctx, thief, s2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("another namespace registered h1: %v", err)
	}
	grace := 2 * time.Second
	if e.fake != nil {
		grace = 10 * time.Second // in fake time, longer than the lease TTL
	}
	ch, err := f.WatchHosts(ctx, LivenessOptions{Grace: grace, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	wantHost(t, ch, HostJoined, "h1")
	wantHost(t, ch, HostJoined, "h2")

	if e.fake != nil {
		// A blip: the record goes and comes back within the grace period.
		// Only its removal is reported (for h1 itself, to write it again);
		// the next event is h2's update.
		if err := f.DeregisterHost(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
		wantHost(t, ch, HostRemoved, "h1")
		e.timers(t, 1)
		e.advance(grace / 2)
		if err := f.RegisterHost(ctx, h1, s1); err != nil {
			t.Fatal(err)
		}
		e.timers(t, 0) // the watcher saw h1 come back
		h2.Addrs = []string{"192.0.2.2"}
		if err := f.RegisterHost(ctx, h2, s2); err != nil {
			t.Fatal(err)
		}
		e.advance(grace)
		wantHost(t, ch, HostUpdated, "h2")
	}

	// h2 reboots: same machine, new boot id. The old incarnation is gone at
	// once, the new one joins.
	s2b, _ := e.st.NewSession(ctx, MinTTL)
	defer s2b.Close()
	h2.Identity.BootID = "b2"
	if err := f.RegisterHost(ctx, h2, s2b); err != nil {
		t.Fatal(err)
	}
	if ev := wantHost(t, ch, HostGone, "h2"); ev.Host.Identity.BootID != "b1" {
		t.Fatalf("gone: %+v, want the old incarnation", ev.Host)
	}
	if ev := wantHost(t, ch, HostJoined, "h2"); ev.Host.Identity.BootID != "b2" {
		t.Fatalf("joined: %+v, want the new incarnation", ev.Host)
	}

	// h1's daemon dies: its keepalive stops, the lease ends after its TTL,
	// and h1 is reported gone after the grace period.
	start := time.Now()
	s1.Orphan()
	e.advance(s1.TTL())
	e.timers(t, 1)
	wantHost(t, ch, HostRemoved, "h1")
	e.advance(grace)
	ev := wantHost(t, ch, HostGone, "h1")
	if ev.Host.Identity != h1.Identity {
		t.Fatalf("gone host %+v", ev.Host)
	}
	t.Logf("host gone %v after its keepalive stopped (TTL %v + grace %v)", time.Since(start).Round(time.Millisecond), s1.TTL(), grace)
	if hosts, _ := f.Hosts(ctx); len(hosts) != 1 || hosts[0].Name != "h2" {
		t.Fatalf("hosts after h1 died: %+v", hosts)
	}
}

// TestWatchHostsTrust: with a Trust hook, a record it refuses is as if it
// had not been written — the host keeps its record, no HostGone, however
// the refused one's identity differs — and is reported HostRefused; a
// record under another host's name is refused too, hook or not.
func TestWatchHostsTrust(t *testing.T) {
	clock := NewFakeClock(time.Unix(1e9, 0))
	st := NewMemStore(clock)
	f, err := New(st, "sw")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := st.NewSession(ctx, MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	h1 := testHost()
	if err := f.RegisterHost(ctx, h1, sess); err != nil {
		t.Fatal(err)
	}
	trust := func(h Host, lease LeaseID) (Host, error) {
		if h.Identity.MachineID == "evil" || lease == NoLease {
			return Host{}, errors.New("not as its host wrote it")
		}
		return h, nil
	}
	ch, err := f.WatchHosts(ctx, LivenessOptions{Grace: time.Hour, Clock: clock, Trust: trust})
	if err != nil {
		t.Fatal(err)
	}
	wantHost(t, ch, HostJoined, h1.Name)
	put := func(key string, h Host, lease LeaseID) {
		t.Helper()
		if _, err := st.Put(ctx, "/vrdma/sw/hosts/"+key, encode(h), lease); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(name, why string) {
		t.Helper()
		ev := nextHost(t, ch)
		if ev.Type != HostRefused || ev.Host.Name != name || ev.Err == nil || !strings.Contains(ev.Err.Error(), why) {
			t.Fatalf("got %v %s (%v), want %v %s saying %q", ev.Type, ev.Host.Name, ev.Err, HostRefused, name, why)
		}
	}
	junk := h1
	junk.Identity = Identity{MachineID: "evil", BootID: "evil"}
	put(h1.Name, junk, NoLease)
	refused(h1.Name, "not as its host wrote it")
	put(h1.Name, h1, NoLease) // a replay without the host's lease
	refused(h1.Name, "not as its host wrote it")
	other := h1
	other.Name = "h9"
	put("h7", other, sess.Lease()) // h9's record under h7's name
	refused("h7", `host "h9"'s`)
	h1.Addrs = []string{"192.0.2.9"}
	if err := f.RegisterHost(ctx, h1, sess); err != nil {
		t.Fatal(err)
	}
	// Nothing went: the next event is h1's own update, not a HostGone.
	wantHost(t, ch, HostUpdated, h1.Name)
}

// TestRegisterOverUntrustedRecord: a record of another identity under a
// host's name stops RegisterHost (two daemons with one name), unless the
// caller's trust refuses it: then it is replaced.
func TestRegisterOverUntrustedRecord(t *testing.T) {
	st := NewMemStore(NewFakeClock(time.Unix(1e9, 0)))
	f, err := New(st, "sw")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := st.NewSession(ctx, MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	h := testHost()
	junk := h
	junk.Identity = Identity{MachineID: "evil", BootID: "evil"}
	if _, err := st.Put(ctx, "/vrdma/sw/hosts/"+h.Name, encode(junk), NoLease); err != nil {
		t.Fatal(err)
	}
	if err := f.RegisterHost(ctx, h, sess); !errors.Is(err, ErrInvalid) {
		t.Fatalf("RegisterHost over another identity's record: %v, want ErrInvalid", err)
	}
	refuseEvil := func(old Host, _ LeaseID) (Host, error) {
		if old.Identity.MachineID == "evil" {
			return Host{}, errors.New("unsigned")
		}
		return old, nil
	}
	if err := f.RegisterHostTrusting(ctx, h, sess, refuseEvil); err != nil {
		t.Fatalf("RegisterHostTrusting over an untrusted record: %v", err)
	}
	got, err := f.Host(ctx, h.Name)
	if err != nil || got.Identity != h.Identity {
		t.Fatalf("the record now: %+v, %v", got, err)
	}
}
