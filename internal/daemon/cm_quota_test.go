package daemon_test

// What a tenant makes the daemon hold for the connection manager is its
// own to pay for: listeners and connections count against its limits
// (cmlisten, cmconn), a connection until its client has its last event,
// and a listener that stops reading its events gets no more requests.

import (
	"os"
	"testing"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

// A listener whose client stops reading its socket: once cmLagEvents of
// its events wait in the daemon, requests are rejected at once (no
// resources), not queued; each request it got is charged to its uid.
// When it reads again, it gets every request it was charged for, and new
// ones are served.
func TestCMListenerNotReading(t *testing.T) {
	d := cmDaemon(t)
	uid := uint32(os.Geteuid())
	s := listenSession(t, d, 7000, 4096)
	// From twelve hosts: one may have only 256 requests being set up
	// here (connmgr's MaxInProgressPerSource).
	ps, dst := madPeers(t, d, 12)
	const n, batch = 3000, 200
	pd := make([]byte, 56)
	var served uint64
	refused := func() (all []ibcm.REJ) {
		for _, p := range ps {
			all = append(all, p.REJs()...)
		}
		return all
	}
	for sent := 0; sent < n; {
		// In batches: a burst longer than QP1's queue would be dropped
		// (and counted), as a link drops what it cannot take.
		for range batch {
			sent++
			p := ps[sent%len(ps)]
			p.SendREQ(p.REQ(dst, 7000, uint32(sent), pd))
		}
		waitCM(t, "every request to be served or refused", func() bool {
			served = d.UsedBy(uid)["cmconn"]
			return served+uint64(len(refused())) == uint64(sent)
		})
	}
	rejs := refused()
	t.Logf("%d requests: %d queued or delivered, %d refused; %d events wait in the daemon", n, served, len(rejs), d.CMQueued())
	if len(rejs) == 0 {
		t.Fatal("every request was queued for a client that does not read")
	}
	for _, r := range rejs {
		if r.Reason != ibcm.RejectNoResources {
			t.Fatalf("refusal %+v, want no resources: not reading", r)
		}
	}
	if q := d.CMQueued(); q > daemon.CMLagEvents {
		t.Fatalf("%d events wait in the daemon, more than the %d that make a session lagging", q, daemon.CMLagEvents)
	}
	if st := d.CMStats(); st.Lagging != uint64(len(rejs)) {
		t.Fatalf("stats %+v, want %d requests refused for a lagging listener", st, len(rejs))
	}
	for range served {
		if ev := s.event(); ev.Type != proto.CMEventRequest {
			t.Fatalf("event %+v, want a request", ev)
		}
	}
	ps[0].SendREQ(ps[0].REQ(dst, 7000, n+1, nil))
	if ev := s.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v: a listener that reads again is served", ev)
	}
	s.Close()
	waitCM(t, "the uid's connections to be given back", func() bool { return d.UsedBy(uid)["cmconn"] == 0 })
}

// Listeners and connections count against the uid's limits: the next one
// is refused (a command with CodeLimit naming the limit and its flag; a
// request with a REJ), and they come back when they end.
func TestCMQuota(t *testing.T) {
	d := cmDaemonWith(t, func(c *daemon.Config) {
		c.UserLimits = daemon.Limits{daemon.CMListeners: 2, daemon.CMConns: 2}
	})
	uid := uint32(os.Geteuid())
	a := listenSession(t, d, 7000, 8)
	a.ok(proto.OpCMListen, proto.CMListenReq{ID: 2, Port: 7001}, nil)
	a.fails(proto.OpCMListen, proto.CMListenReq{ID: 3, Port: 7002}, proto.CodeLimit,
		"holds 2 connection manager listeners (cmlisten) of 2 allowed (limit cmlisten=2): stop listening on some ports, or have the daemon started with a higher `--limit cmlisten=N`")
	b := dial(t, d.SocketPath())
	o := prepare(b)
	b.fails(proto.OpCMListen, proto.CMListenReq{ID: 1, Port: 7003}, proto.CodeLimit, "(limit cmlisten=2)")

	p, dst := madPeer(t, d)
	for i, port := range []uint16{7000, 7001} {
		p.SendREQ(p.REQ(dst, port, uint32(i+1), nil))
		if ev := a.event(); ev.Type != proto.CMEventRequest {
			t.Fatalf("event %+v", ev)
		}
	}
	p.SendREQ(p.REQ(dst, 7000, 3, nil))
	p.ExpectREJ(3, ibcm.RejectNoResources)
	b.fails(proto.OpCMConnect, proto.CMConnectReq{ID: 5, QP: o.qp, PSN: 1, Addr: a.gid[:], Port: 7000}, proto.CodeLimit,
		"connection manager connections (cmconn) of 2 allowed (limit cmconn=2): disconnect or reject some")
	if st := d.CMStats(); st.OverLimit != 1 {
		t.Fatalf("stats %+v, want one request over the limit", st)
	}
	if got := d.UsedBy(uid); got["cmlisten"] != 2 || got["cmconn"] != 2 {
		t.Fatalf("uid holds %v, want 2 listeners and 2 connections", got)
	}

	// The requester gives up: the connections come back, and the dial
	// that was refused goes.
	for id := uint32(1); id <= 2; id++ {
		p.SendREJ(dst, id, ibcm.RejectTimeout)
		if ev := a.event(); ev.Type != proto.CMEventRejected {
			t.Fatalf("event %+v", ev)
		}
	}
	waitCM(t, "the connections to be given back", func() bool { return d.UsedBy(uid)["cmconn"] == 0 })
	// A connection between two sessions of the uid counts twice: the
	// dial, and the request the listener got.
	b.ok(proto.OpCMConnect, proto.CMConnectReq{ID: 5, QP: o.qp, PSN: 1, Addr: a.gid[:], Port: 7000}, nil)
	if ev := a.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v", ev)
	}
	if n := d.UsedBy(uid)["cmconn"]; n != 2 {
		t.Fatalf("uid holds %d connections, want 2: both sides of one", n)
	}
	a.Close()
	b.Close()
	waitCM(t, "everything to be given back", func() bool {
		got := d.UsedBy(uid)
		return got["cmlisten"] == 0 && got["cmconn"] == 0
	})
}
