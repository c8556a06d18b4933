package daemon_test

// The daemon's side of the connection manager (package connmgr has the
// manager's own tests): its commands, the events that reach a session's
// client, and what a session that ends leaves behind.

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm/cmtest"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/fakelink"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

// cmDaemon runs a daemon on no switch, with no link until a test attaches
// one (madPeer).
func cmDaemon(t testing.TB) *daemon.Daemon { return cmDaemonWith(t, func(*daemon.Config) {}) }

// cmDaemonWith runs a daemon like cmDaemon, with mod applied to its
// config.
func cmDaemonWith(t testing.TB, mod func(*daemon.Config)) *daemon.Daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "vrdma-cm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := daemon.Config{SocketPath: filepath.Join(dir, "vrdma.sock"), HostName: "cm-test"}
	mod(&cfg)
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve()
	t.Cleanup(func() { d.Close() })
	return d
}

// madPeer joins d to a fake network by a link of address 10.0.0.1 and
// returns a hand-made connection manager on another host of it (package
// cmtest), which sends CM MADs to QP1 of d's host, and the address it
// sends them to.
func madPeer(t testing.TB, d *daemon.Daemon) (*cmtest.MADPeer, [16]byte) {
	t.Helper()
	ps, dst := madPeers(t, d, 1)
	return ps[0], dst
}

// madPeers is madPeer with n peers, of addresses 10.0.1.1 and up.
func madPeers(t testing.TB, d *daemon.Daemon, n int) ([]*cmtest.MADPeer, [16]byte) {
	t.Helper()
	net := fakelink.New(1)
	addr := netip.MustParseAddr("10.0.0.1")
	l := net.Link("rxe0", [6]byte{0x52, 0x54, 0, 0xcd, 0, 1}, addr)
	if err := d.AttachLink(l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ps := make([]*cmtest.MADPeer, n)
	for i := range ps {
		ps[i] = cmtest.NewMADPeer(t, net, netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)}))
	}
	return ps, addr.As16()
}

// waitCM waits for cond, failing the test after cmtest.Wait.
func waitCM(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(cmtest.Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// cmSession is a session that opened vrdma0 and listens.
type cmSession struct {
	*rawClient
	gid [16]byte
}

func listenSession(t testing.TB, d *daemon.Daemon, port uint16, backlog int) *cmSession {
	t.Helper()
	c := dial(t, d.SocketPath())
	var hello proto.HelloResp
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "cm-test"}, &hello)
	var resp proto.CMListenResp
	c.ok(proto.OpCMListen, proto.CMListenReq{ID: 1, Port: port, Backlog: backlog}, &resp)
	if resp.Port != port {
		t.Fatalf("listening on %d, want %d", resp.Port, port)
	}
	return &cmSession{rawClient: c, gid: [16]byte(hello.Device.GIDs[0])}
}

// event reads the session's next connection manager event.
func (c *cmSession) event() proto.CMEvent {
	c.t.Helper()
	for {
		h, body, fds, err := c.conn.Recv()
		proto.CloseFDs(fds)
		if err != nil {
			c.t.Fatalf("no event: %v", err)
		}
		if h.Kind == proto.KindEvent && h.Op == proto.OpCMEvent {
			var ev proto.CMEvent
			if err := proto.Decode(body, &ev); err != nil {
				c.t.Fatal(err)
			}
			return ev
		}
	}
}

// A request from another host reaches the client of the listening
// session as an event, through the session's outbox; a request the daemon
// cannot serve is rejected in the daemon's name; a request the session
// holds when it ends is rejected, and its listener is gone.
func TestCMSessionEvents(t *testing.T) {
	d := cmDaemon(t)
	s := listenSession(t, d, 7000, 1)
	p, dst := madPeer(t, d)
	p.SendREQ(p.REQ(dst, 7000, 21, []byte("hi")))
	ev := s.event()
	if ev.Type != proto.CMEventRequest || ev.Listener != 1 || ev.ID < proto.CMDaemonIDBase || ev.QPN != 0x77 || ev.PSN != 0x1234 ||
		ev.MTU != 3 || ev.RdAtomic != 4 || ev.QPType != uint8(abi.QPTypeRC) || string(bytes.TrimRight(ev.PrivateData, "\x00")) != "hi" ||
		!bytes.Equal(ev.GID, p.GID[:]) || ev.RemotePort != 40000 || ev.LocalPort != 7000 {
		t.Fatalf("request event %+v", ev)
	}
	elsewhere := p.REQ(dst, 7000, 22, nil)
	elsewhere.Primary.RemoteGID = [16]byte{10: 0xff, 11: 0xff, 198, 51, 100, 7} // no adapter's
	b, err := elsewhere.Append(ibcm.AppendHeader(nil, ibcm.CMHeader(ibcm.AttrREQ, 22)))
	if err != nil {
		t.Fatal(err)
	}
	p.Send(dst, b)
	p.ExpectREJ(22, ibcm.RejectInvalidGID)
	s.Close()
	p.ExpectREJ(21, ibcm.RejectInvalidServiceID)
	p.SendREQ(p.REQ(dst, 7000, 23, nil))
	p.ExpectREJ(23, ibcm.RejectInvalidServiceID)
	checkAlive(t, d.SocketPath())
}

// Commands with bad arguments get errors that say what to fix.
func TestCMCommandErrors(t *testing.T) {
	d := cmDaemon(t)
	c := dial(t, d.SocketPath())
	o := prepare(c)
	c.fails(proto.OpCMListen, proto.CMListenReq{ID: 0, Port: 1}, proto.CodeInvalid, "the library's ids are 1 to")
	c.fails(proto.OpCMListen, proto.CMListenReq{ID: proto.CMDaemonIDBase, Port: 1}, proto.CodeInvalid, "ids are")
	c.fails(proto.OpCMListen, proto.CMListenReq{ID: 1, Port: 1, Backlog: -1}, proto.CodeInvalid, "backlog")
	c.ok(proto.OpCMListen, proto.CMListenReq{ID: 1, Port: 1}, nil)
	c.fails(proto.OpCMListen, proto.CMListenReq{ID: 1, Port: 2}, proto.CodeBusy, "id 1 is in use")
	c.fails(proto.OpCMListen, proto.CMListenReq{ID: 2, Port: 1}, proto.CodeBusy, "port 1 is in use")
	c.fails(proto.OpCMCancelListen, proto.CMCancelListenReq{ID: 9}, proto.CodeNotFound, "no listener 9")
	gid := [16]byte{0xfe, 0x80, 15: 1}
	connect := func(f func(r *proto.CMConnectReq)) proto.CMConnectReq {
		r := proto.CMConnectReq{ID: 5, QP: o.qp, PSN: 1, Addr: gid[:], Port: 1}
		f(&r)
		return r
	}
	c.fails(proto.OpCMConnect, connect(func(r *proto.CMConnectReq) { r.PrivateData = make([]byte, 57) }), proto.CodeInvalid, "at most 56")
	c.fails(proto.OpCMConnect, connect(func(r *proto.CMConnectReq) { r.PSN = 1 << 24 }), proto.CodeInvalid, "24 bits")
	c.fails(proto.OpCMConnect, connect(func(r *proto.CMConnectReq) { r.Addr = gid[:4] }), proto.CodeInvalid, "a GID has 16")
	c.fails(proto.OpCMConnect, connect(func(r *proto.CMConnectReq) { r.Addr = make([]byte, 16) }), proto.CodeInvalid, "address ::")
	c.fails(proto.OpCMConnect, connect(func(r *proto.CMConnectReq) { r.Port = 0 }), proto.CodeInvalid, "port 0")
	c.fails(proto.OpCMConnect, connect(func(r *proto.CMConnectReq) { r.QP = 99 }), proto.CodeNotFound, "no queue pair")
	c.fails(proto.OpCMConnect, connect(func(r *proto.CMConnectReq) { r.ID = 0 }), proto.CodeInvalid, "ids are")
	remote := [16]byte{10: 0xff, 11: 0xff, 192, 0, 2, 9}
	c.fails(proto.OpCMConnect, connect(func(r *proto.CMConnectReq) { r.Addr = remote[:] }), proto.CodeNotFound, "cannot find the connection manager of 192.0.2.9")
	for _, op := range []proto.Op{proto.OpCMAccept, proto.OpCMReject, proto.OpCMDisconnect} {
		c.fails(op, proto.CMAcceptReq{ID: 77}, proto.CodeNotFound, "no connection 77")
	}
	c.fails(proto.OpCMReject, proto.CMRejectReq{ID: 77, Text: strings.Repeat("x", 200)}, proto.CodeInvalid, "at most 128")
	c.fails(proto.OpCMDisconnect, proto.CMDisconnectReq{ID: 77, PrivateData: make([]byte, 221)}, proto.CodeInvalid, "at most 220")
	// An admin connection has no device.
	a := dial(t, d.SocketPath())
	a.ok(proto.OpHello, proto.HelloReq{Client: "cm-test"}, nil)
	a.fails(proto.OpCMListen, proto.CMListenReq{ID: 1, Port: 3}, proto.CodeInvalid, "needs an opened device")
}
