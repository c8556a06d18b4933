package vrdma_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemon"
)

// TestLIDAcrossHosts: between two hosts of a switch (two daemons in this
// process, on 127.0.0.1 and 127.0.0.2, joined by the TCP channel), the
// default instances' ports — what a program that names no instance opens,
// qperf for one — reach each other by LID alone when the daemons route by
// LID (--lid-routing): an RC QP connects and
// moves data both ways, and a UD address handle sends, exactly as by GID.
func TestLIDAcrossHosts(t *testing.T) {
	var socks [2]string
	var endpoints []string
	for i := range socks {
		dir, err := os.MkdirTemp("", "vrdma-lidx-") // short: a socket path has 108 bytes
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		name := fmt.Sprint("host", i+1)
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})
		d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, "s.sock"), StateDir: filepath.Join(dir, "state"), HostName: name, LIDRouting: true,
			Switch: daemon.SwitchConfig{Enable: true, HostTag: name, TCPListen: ip.String() + ":0",
				TCPAddrs: []netip.Addr{ip}, Endpoints: endpoints, HostTTL: 2 * time.Second, Grace: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		go d.Serve()
		t.Cleanup(func() { d.Close() })
		socks[i], endpoints = d.SocketPath(), d.SwitchEndpoints()
	}
	var devs [2]*vrdma.Device
	for i, s := range socks {
		d, err := vrdma.Open("vrdma0", vrdma.Options{Socket: s})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	l0, l1 := awaitLIDs(t, devs[0], devs[1])
	if l0 == l1 {
		t.Fatalf("the hosts' default ports have LIDs %#x and %#x: want two different ones", l0, l1)
	}

	t.Run("RC", func(t *testing.T) {
		a, b := newSide(t, devs[0], qpSpec{}), newSide(t, devs[1], qpSpec{})
		connectByLID(t, a, b)
		const n = 4000 // more than one packet of the TCP channel's MTU
		src := fill(a.mr.Bytes()[srcOff:srcOff+n], 11)
		postRecv(t, b.qp, recvWR(1, b.mr.SGE(recvOff, n)))
		post(t, a.qp, vrdma.SendWR{ID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, n)}})
		checkWC(t, pollOne(t, a.scq), sendWC(a, 2, ibv.WCSend, n))
		checkWC(t, pollOne(t, b.rcq), recvWC(b, 1, n, a))
		expectBytes(t, "receive buffer on host2", b.mr.Bytes()[recvOff:recvOff+n], src)

		remote := fill(a.mr.Bytes()[rdmaOff:rdmaOff+n], 12)
		post(t, b.qp, vrdma.SendWR{ID: 3, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled, SGL: []ibv.SGE{b.mr.SGE(dstOff, n)},
			RemoteAddr: a.mr.Addr() + rdmaOff, RKey: a.mr.RKey()})
		checkWC(t, pollOne(t, b.scq), sendWC(b, 3, ibv.WCRDMARead, n))
		expectBytes(t, "RDMA READ from host1", b.mr.Bytes()[dstOff:dstOff+n], remote)

		attr, _, err := a.qp.Query()
		if err != nil {
			t.Fatal(err)
		}
		if attr.AV.DGID != b.gid {
			t.Errorf("host1's QP resolved host2's LID to %v, want its GID %v", attr.AV.DGID, b.gid)
		}
		if p, err := devs[0].QueryPort(1); err != nil || p.Counters.PathTCP == 0 {
			t.Errorf("host1's port counted %d messages on the TCP channel (%v): want the QP's", p.Counters.PathTCP, err)
		}
	})

	t.Run("UD", func(t *testing.T) {
		a, b := newSide(t, devs[0], qpSpec{typ: ibv.UD}), newSide(t, devs[1], qpSpec{typ: ibv.UD})
		for _, x := range []*side{a, b} {
			if err := x.qp.Connect(vrdma.Endpoint{}, nil); err != nil {
				t.Fatal(err)
			}
		}
		ah, err := a.pd.CreateAH(ibv.AHAttr{DLID: portLID(t, devs[1]), PortNum: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Destroy()
		a.ah = ah
		const n = 200
		src := fill(a.mr.Bytes()[srcOff:srcOff+n], 13)
		postRecv(t, b.qp, recvWR(4, b.mr.SGE(recvOff, grhLen+n)))
		post(t, a.qp, a.sendTo(vrdma.SendWR{ID: 5, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, n)}}, b))
		checkWC(t, pollOne(t, a.scq), sendWC(a, 5, ibv.WCSend, n))
		want := recvWC(b, 4, grhLen+n, a)
		want.Flags = ibv.WCWithGRH
		checkWC(t, pollOne(t, b.rcq), want)
		expectBytes(t, "datagram on host2", b.mr.Bytes()[recvOff+grhLen:recvOff+grhLen+n], src)
	})
}

// connectByLID connects x and y with each knowing only the other's LID,
// QPN and PSN.
func connectByLID(t *testing.T, x, y *side) {
	t.Helper()
	ex, ey := byLID(t, x), byLID(t, y)
	if err := x.qp.Connect(ey, x.connectOptions(nil)); err != nil {
		t.Fatal(err)
	}
	if err := y.qp.Connect(ex, y.connectOptions(nil)); err != nil {
		t.Fatal(err)
	}
}

// awaitLIDs waits until the ports of x and y, on two hosts of a switch,
// have LIDs and each host resolves the other's: the subnet manager assigns
// a port its LID, and a daemon learns another host's LIDs and record from
// the switch, a moment after they change (30 s is a hang guard, not a
// timing check). It returns the two LIDs.
func awaitLIDs(t *testing.T, x, y *vrdma.Device) (lx, ly uint16) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	lid := func(d *vrdma.Device) uint16 {
		for {
			if l := portLID(t, d); l != 0 {
				return l
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's port has no LID", d.Name())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	lx, ly = lid(x), lid(y)
	for _, p := range []struct {
		from *vrdma.Device
		lid  uint16
	}{{x, ly}, {y, lx}} {
		pd, err := p.from.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		for {
			ah, err := pd.CreateAH(ibv.AHAttr{DLID: p.lid, PortNum: 1})
			if err == nil {
				_ = ah.Destroy()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s on host %s never resolves LID %#x: %v", p.from.Name(), p.from.Info().Host, p.lid, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		_ = pd.Dealloc()
	}
	return lx, ly
}
