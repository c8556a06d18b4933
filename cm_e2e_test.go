package vrdma_test

// The connection manager end to end through the public API: two instances
// on one daemon (the memcpy path, CM messages inside the daemon), and two
// daemons joined by in-process links (the RoCEv2 path, CM messages over
// TCP on loopback). The QPs get every attribute from the connection
// manager; the tests check them and run traffic over them.

import (
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// checkConnected checks that x's QP is in RTS, connected to y's with the
// attributes the connection manager filled in. As in IBTA's CM (and Linux's
// rdma_cm), the Starting PSN a side sends in its REQ or REP is the first it
// expects to receive: x's RQ PSN is x's own, and x sends from y's.
func checkConnected(t *testing.T, x, y *side, dgid vrdma.GID, mtu ibv.MTU) {
	t.Helper()
	attr, _, err := x.qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := x.qp.Endpoint(0)
	if err != nil {
		t.Fatal(err)
	}
	if attr.State != ibv.QPSRTS || attr.DestQPN != y.qp.QPN() || attr.RQPSN != ex.PSN ||
		attr.AV.DGID != dgid || attr.PathMTU != mtu {
		t.Fatalf("QP 0x%x: state %v, dest QPN 0x%x, RQ PSN %#x, DGID %v, MTU %v; want RTS, 0x%x, %#x, %v, %v",
			x.qp.QPN(), attr.State, attr.DestQPN, attr.RQPSN, attr.AV.DGID, attr.PathMTU, y.qp.QPN(), ex.PSN, dgid, mtu)
	}
	if ey, err := y.qp.Endpoint(0); err != nil {
		t.Fatal(err)
	} else if attr.SQPSN != ey.PSN {
		t.Fatalf("QP 0x%x: SQ PSN %#x, want the peer's Starting PSN %#x (checked before traffic)", x.qp.QPN(), attr.SQPSN, ey.PSN)
	}
	if attr.MaxRdAtomic == 0 || attr.MaxDestRdAtomic == 0 {
		if x.qp.Type() == ibv.RC {
			t.Fatalf("QP 0x%x: max_rd_atomic %d, max_dest_rd_atomic %d: RDMA READ would not work", x.qp.QPN(), attr.MaxRdAtomic, attr.MaxDestRdAtomic)
		}
	}
}

func portMTU(t *testing.T, dev *vrdma.Device) ibv.MTU {
	t.Helper()
	p, err := dev.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	return p.ActiveMTU
}

// Two instances on one daemon: RC with every operation, UC with SEND and
// WRITE, connected by address and port alone.
func TestCMSameHost(t *testing.T) {
	e := sameHostEnv(t)
	t.Run("RC", func(t *testing.T) {
		a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
		addr := gidAddr(t, e.b, 0)
		ca, cb := cmConnect(t, a, b, addr)
		mtu := min(portMTU(t, e.a), portMTU(t, e.b))
		checkConnected(t, a, b, vrdma.GID(addr.As16()), mtu)
		checkConnected(t, b, a, vrdma.GID(gidAddr(t, e.a, 0).As16()), mtu)
		if p, reason := ca.Path(); p != "memcpy" {
			t.Fatalf("path %q (%s), want memcpy", p, reason)
		}
		if ca.RemoteAddr() != addr || cb.LocalAddr() != addr || cb.RemoteAddr() != gidAddr(t, e.a, 0) ||
			cb.LocalPort() == 0 || cb.RemotePort() != ca.LocalPort() || ca.RemotePort() != cb.LocalPort() || ca.QP() != a.qp {
			t.Fatalf("addresses: requester %v:%d -> %v:%d, listener %v:%d <- %v:%d", ca.LocalAddr(), ca.LocalPort(),
				ca.RemoteAddr(), ca.RemotePort(), cb.LocalAddr(), cb.LocalPort(), cb.RemoteAddr(), cb.RemotePort())
		}
		rcWorkload(t, a, b, 3)
	})
	t.Run("UC", func(t *testing.T) {
		a, b := newSide(t, e.a, qpSpec{typ: ibv.UC}), newSide(t, e.b, qpSpec{typ: ibv.UC})
		cmConnect(t, a, b, gidAddr(t, e.b, 0))
		ucTraffic(t, a, b)
	})
}

// Two daemons whose hosts are joined by a link: the QPs connect over the
// RoCEv2 path with the link's MTU and its IPv4 GIDs.
func TestCMTwoHosts(t *testing.T) {
	h := newCMHosts(t, ibv.MTU1024)
	e := h.env(t)
	t.Run("RC", func(t *testing.T) {
		a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
		ca, cb := cmConnect(t, a, b, h.addrs[1])
		checkConnected(t, a, b, vrdma.GID(h.addrs[1].As16()), ibv.MTU1024)
		checkConnected(t, b, a, vrdma.GID(h.addrs[0].As16()), ibv.MTU1024)
		if p, reason := ca.Path(); p != "rdma" {
			t.Fatalf("path %q (%s), want rdma", p, reason)
		}
		if cb.RemoteAddr() != h.addrs[0] || ca.LocalAddr() != h.addrs[0] {
			t.Fatalf("the listener sees the requester at %v, the requester is at %v; want %v", cb.RemoteAddr(), ca.LocalAddr(), h.addrs[0])
		}
		rcWorkload(t, a, b, 3)
	})
	t.Run("UC", func(t *testing.T) {
		a, b := newSide(t, e.a, qpSpec{typ: ibv.UC}), newSide(t, e.b, qpSpec{typ: ibv.UC})
		cmConnect(t, a, b, h.addrs[1])
		ucTraffic(t, a, b)
	})
	t.Run("the other way", func(t *testing.T) {
		a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
		cmConnect(t, b, a, h.addrs[0])
		rcWorkload(t, b, a, 1)
	})
}

// ucTraffic sends and writes from a to b over UC.
func ucTraffic(t *testing.T, a, b *side) {
	t.Helper()
	for i := uint64(0); i < 5; i++ {
		src := fill(a.mr.Bytes()[srcOff:srcOff+2000], byte(i))
		postRecv(t, b.qp, recvWR(i, b.mr.SGE(recvOff, 2000)))
		post(t, a.qp, vrdma.SendWR{ID: i, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 2000)}})
		checkWC(t, pollOne(t, a.scq), sendWC(a, i, ibv.WCSend, 2000))
		checkWC(t, pollOne(t, b.rcq), recvWC(b, i, 2000, a))
		expectBytes(t, "UC SEND", b.mr.Bytes()[recvOff:recvOff+2000], src)

		src = fill(a.mr.Bytes()[srcOff:srcOff+2000], byte(i+100))
		post(t, a.qp, vrdma.SendWR{ID: 10 + i, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 2000)},
			RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
		checkWC(t, pollOne(t, a.scq), sendWC(a, 10+i, ibv.WCRDMAWrite, 2000))
		arrived(t, ibv.UC, b.mr.Bytes()[rdmaOff:rdmaOff+2000], src)
		expectBytes(t, "UC WRITE", b.mr.Bytes()[rdmaOff:rdmaOff+2000], src)
	}
}

// A listener's port is the host's: a second listener on it is refused,
// whichever instance asks; port 0 gets a free one.
func TestCMListenPortInUse(t *testing.T) {
	e := sameHostEnv(t)
	l := listen(t, e.a, 7471)
	if l.Port() != 7471 {
		t.Fatalf("port %d, want 7471", l.Port())
	}
	for _, dev := range []*vrdma.Device{e.a, e.b} {
		_, err := dev.Listen(7471)
		expectErr(t, err, vrdma.ErrBusy, "port 7471 is in use", "pick another port")
	}
	l0 := listen(t, e.b, 0)
	if l0.Port() == 0 || l0.Port() == 7471 {
		t.Fatalf("port 0 got port %d", l0.Port())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	listen(t, e.b, 7471) // free again
}

// A UD dial carries at most 180 bytes; a QP not in RESET cannot be
// connected.
func TestCMDialRefusesBadQPs(t *testing.T) {
	e := sameHostEnv(t)
	ctx := cmCtx(t)
	ud := newSide(t, e.a, qpSpec{typ: ibv.UD})
	addr := gidAddr(t, e.b, 0)
	_, err := e.a.Dial(ctx, ud.qp, addr, 1, make([]byte, 181))
	expectErr(t, err, vrdma.ErrPrivateDataTooLarge, "at most 180")

	a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
	connect(t, a, b, nil, nil)
	_, err = e.a.Dial(ctx, a.qp, addr, 1, nil)
	expectErr(t, err, vrdma.ErrInvalidState, "RESET")

	x := newSide(t, e.a, qpSpec{})
	_, err = e.b.Dial(ctx, x.qp, addr, 1, nil)
	expectErr(t, err, vrdma.ErrInvalidArgument, "one of this device")
	_, err = e.a.Dial(ctx, x.qp, netip.Addr{}, 1, nil)
	expectErr(t, err, vrdma.ErrInvalidArgument, "no address")
	_, err = e.a.Dial(ctx, x.qp, addr, 0, nil)
	expectErr(t, err, vrdma.ErrInvalidArgument, "port 0")
}

// Many requesters at once to one listener: every connection is made, with
// its own pair of QPs, and carries traffic; then all end.
func TestCMConcurrentDials(t *testing.T) {
	h := newCMHosts(t, ibv.MTU1024)
	e := h.env(t)
	const n = 12
	as, bs := make([]*side, n), make([]*side, n)
	free := make(chan *side, n)
	for i := range as {
		as[i], bs[i] = newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
		free <- bs[i]
	}
	ctx := cmCtx(t)
	l := listen(t, e.b, 0)
	served := make(chan error, n)
	go func() {
		for i := 0; i < n; i++ {
			req, err := l.Accept(ctx)
			if err != nil {
				served <- err
				return
			}
			go func() {
				_, err := req.Accept(ctx, (<-free).qp, req.PrivateData)
				served <- err
			}()
		}
	}()
	conns := make([]*vrdma.Conn, n)
	errs := make(chan error, n)
	for i := range as {
		go func() {
			c, err := e.a.Dial(ctx, as[i].qp, h.addrs[1], l.Port(), []byte{byte(i)})
			conns[i] = c
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		if !samePrivate(c.PrivateData(), string([]byte{byte(i)})) {
			t.Fatalf("connection %d got the reply %v", i, c.PrivateData())
		}
		// Each requester's QP reaches the listener's QP that accepted it.
		attr, _, err := as[i].qp.Query()
		if err != nil {
			t.Fatal(err)
		}
		var peer *side
		for _, b := range bs {
			if b.qp.QPN() == attr.DestQPN {
				peer = b
			}
		}
		if peer == nil {
			t.Fatalf("connection %d goes to QP 0x%x, no listener QP", i, attr.DestQPN)
		}
		rcWorkload(t, as[i], peer, 1)
	}
	for _, c := range conns {
		if err := c.Disconnect(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// A UD QP's dial resolves the listener's UD QP (SIDR, rdma_cm's UDP port
// space): its QPN and Q_Key come back, and a datagram sent with them
// arrives.
func TestCMUD(t *testing.T) {
	cmEnvs(t, func(t *testing.T, e *confEnv, addrB netip.Addr) {
		ctx := cmCtx(t)
		a, b := newSide(t, e.a, qpSpec{typ: ibv.UD}), newSide(t, e.b, qpSpec{typ: ibv.UD})
		oa, ob := vrdma.DefaultConnectOptions(), vrdma.DefaultConnectOptions()
		ob.QKey = 0x2222
		if err := a.qp.Connect(vrdma.Endpoint{}, &oa); err != nil {
			t.Fatal(err)
		}
		if err := b.qp.Connect(vrdma.Endpoint{}, &ob); err != nil {
			t.Fatal(err)
		}
		l := listen(t, e.b, 0)
		got := acceptOne(ctx, l, b.qp, []byte("welcome"))
		c, err := e.a.Dial(ctx, a.qp, addrB, l.Port(), []byte("hello"))
		if err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		if c.RemoteQPN() != b.qp.QPN() || c.RemoteQKey() != 0x2222 || !samePrivate(c.PrivateData(), "welcome") ||
			r.req.QPType != ibv.UD || !samePrivate(r.req.PrivateData, "hello") || c.RemoteAddr() != addrB {
			t.Fatalf("resolved QPN %#x Q_Key %#x at %v (%q); want %#x, 0x2222 at %v; the request: %v %q",
				c.RemoteQPN(), c.RemoteQKey(), c.RemoteAddr(), c.PrivateData(), b.qp.QPN(), addrB, r.req.QPType, r.req.PrivateData)
		}
		a.ah = newAHIndex(t, a, vrdma.GID(addrB.As16()), uint8(gidIndexOf(t, e.a, vrdma.GID(c.LocalAddr().As16()))))
		src := fill(a.mr.Bytes()[srcOff:srcOff+500], 7)
		postRecv(t, b.qp, recvWR(1, b.mr.SGE(recvOff, grhLen+500)))
		post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 500)},
			AH: a.ah, RemoteQPN: c.RemoteQPN(), RemoteQKey: c.RemoteQKey()})
		pollOne(t, a.scq)
		pollOne(t, b.rcq)
		expectBytes(t, "UD SEND to the resolved QP", b.mr.Bytes()[recvOff+grhLen:recvOff+grhLen+500], src)
		if err := c.Disconnect(ctx, nil); err != nil {
			t.Fatalf("disconnecting a UD dial: %v", err)
		}
	})
}
