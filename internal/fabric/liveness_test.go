package fabric

import (
	"errors"
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
		// Nothing is reported; the next event is h2's update.
		if err := f.DeregisterHost(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
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
