package connmgr_test

// CM MADs through the TCP channel: two engine hosts whose only link is a
// TCP channel on loopback (127.0.0.1 and 127.0.0.2), each with a manager
// on the host's QP1. The engine routes QP1's packets over the channel and
// hands those that arrive to the GSI handler, as for a RoCEv2 link.

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/tcplink"
)

// tcpChannelHosts returns two hosts joined by TCP channels, with a
// manager each.
func tcpChannelHosts(t *testing.T) (ma *connmgr.Manager, ha *testHost, mb *connmgr.Manager, hb *testHost) {
	t.Helper()
	addrs := [2]netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
	var eps sync.Map
	peers := func(dst netip.Addr) (admit.Endpoint, bool) {
		ep, ok := eps.Load(dst)
		if !ok {
			return admit.Endpoint{}, false
		}
		return admit.Endpoint{Addr: ep.(string)}, true
	}
	var ms [2]*connmgr.Manager
	var hs [2]*testHost
	for i, a := range addrs {
		l, err := tcplink.Open(tcplink.Config{Name: "tcp0", Addrs: []netip.Addr{a}, Listen: a.String() + ":0", Peers: peers})
		if err != nil {
			t.Fatal(err)
		}
		eps.Store(a, l.ListenAddr().String())
		ms[i], hs[i] = newManager(t, func(c *connmgr.Config) {
			c.GSI = c.Host.(*testHost).Host
			h := c.Host.(*testHost)
			if err := h.AddLink(l); err != nil {
				t.Fatal(err)
			}
			go l.Serve(func(f []byte) { h.Deliver(l, f) }) // ends when the host closes the link
		})
	}
	return ms[0], hs[0], ms[1], hs[1]
}

func TestCMOverTCPChannel(t *testing.T) {
	ma, ha, mb, hb := tcpChannelHosts(t)
	dst := hb.gid()
	if netip.AddrFrom16(dst) != netip.MustParseAddr("::ffff:127.0.0.2") {
		t.Fatalf("the listener's GID is %v, want the TCP channel's", netip.AddrFrom16(dst))
	}
	sb := listenSession(t, mb, hb, 7000, 0)
	sa := newSession(t, ha.adapter)
	qa, qpA := sa.newQP(abi.QPTypeRC)
	if err := sa.do(func() error {
		_, err := ma.Connect(sa, proto.CMConnectReq{ID: 5, QP: qa, PSN: 1, Addr: dst[:], Port: 7000, PrivateData: []byte("over tcp")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ev := sb.event()
	if ev.Type != proto.CMEventRequest || padded(ev.PrivateData) != "over tcp" || ev.QPN != qpA.QPN() {
		t.Fatalf("request %+v", ev)
	}
	qb, qpB := sb.newQP(abi.QPTypeRC)
	connect(t, qpB, ev, 2, false)
	if err := sb.do(func() error { return mb.Accept(sb, proto.CMAcceptReq{ID: ev.ID, QP: qb, PSN: 2}) }); err != nil {
		t.Fatal(err)
	}
	ev = sa.event()
	if ev.Type != proto.CMEventReply || ev.QPN != qpB.QPN() {
		t.Fatalf("reply %+v", ev)
	}
	connect(t, qpA, ev, 1, true)
	if err := sa.do(func() error { return ma.Accept(sa, proto.CMAcceptReq{ID: 5}) }); err != nil {
		t.Fatal(err)
	}
	if ev := sb.event(); ev.Type != proto.CMEventEstablished {
		t.Fatalf("event %+v, want established", ev)
	}
	if err := sa.do(func() error { return ma.Disconnect(sa, proto.CMDisconnectReq{ID: 5}) }); err != nil {
		t.Fatal(err)
	}
	if ev := sb.event(); ev.Type != proto.CMEventDisconnected {
		t.Fatalf("event %+v", ev)
	}
	if ev := sa.event(); ev.Type != proto.CMEventDisconnectDone {
		t.Fatalf("event %+v", ev)
	}
	if a, b := ma.Stats().MADsIn, mb.Stats().MADsIn; a != 2 || b != 3 {
		t.Fatalf("MADs run: requester %d (REP, DREP), listener %d (REQ, RTU, DREQ)", a, b)
	}
}
