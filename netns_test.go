package vrdma_test

// Two hosts as network namespaces joined by a veth pair, each running a
// real daemon with a Soft-RoCE link on its eth0: every operation of RC, UC
// and UD over real UDP sockets, over the IPv4 and the IPv6 link-local GID,
// clean and under nftables loss. Needs root; skipped otherwise.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/netns"
)

// netnsHosts starts a daemon (with daemonArgs) with a link rxe0 on eth0 in
// each of two namespace hosts and opens the conformance instances on them.
func netnsHosts(t *testing.T, daemonArgs ...string) (*netns.Topology, [2]*netns.Daemon, *confEnv) {
	t.Helper()
	netns.Require(t)
	top := netns.New(t, 2)
	var ds [2]*netns.Daemon
	var socks [2]string
	for i, h := range top.Hosts {
		ds[i] = h.StartDaemon(t, daemonArgs...)
		ds[i].Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", h.Iface)
		socks[i] = ds[i].Socket
	}
	return top, ds, newConfEnvOn(t, socks)
}

// gidIndex finds the index of the GID of dev that is addr's.
func gidIndexOf(t *testing.T, dev *vrdma.Device, want vrdma.GID) int {
	t.Helper()
	for i := 0; i < 16; i++ {
		g, err := dev.GID(i)
		if err != nil {
			break
		}
		if g == want {
			return i
		}
	}
	t.Fatalf("no GID %v on %s", want, dev.Name())
	return -1
}

func TestNetnsHosts(t *testing.T) { testNetnsHosts(t) }

// The same with the links' GSO bulk path: RC and UC messages of several
// packets go as GSO runs, under loss too (a lost buffer is a burst).
func TestNetnsHostsGSO(t *testing.T) { testNetnsHosts(t, "--link-gso") }

func testNetnsHosts(t *testing.T, daemonArgs ...string) {
	top, ds, e := netnsHosts(t, daemonArgs...)
	if len(daemonArgs) > 0 {
		defer func() {
			// Both ends sent GSO runs (WRITEs and SENDs one way, READ
			// responses the other) and cut the ones that arrived whole.
			for i, d := range ds {
				out := d.Vrdma(t, "link", "show")
				var tx, rx int
				if j := strings.Index(out, "tx_gso "); j < 0 {
					t.Errorf("host %d: no GSO counters in\n%s", i, out)
				} else if _, err := fmt.Sscanf(out[j:], "tx_gso %d rx_gso %d", &tx, &rx); err != nil || tx == 0 || rx == 0 {
					t.Errorf("host %d: tx_gso %d rx_gso %d (%v), want both above 0", i, tx, rx, err)
				}
			}
		}()
	}
	v4 := gidIndexOf(t, e.a, vrdma.GID(top.Hosts[0].IPv4.As16()))
	v6 := gidIndexOf(t, e.a, vrdma.GID(top.Hosts[0].IPv6LL.As16()))
	if v4b := gidIndexOf(t, e.b, vrdma.GID(top.Hosts[1].IPv4.As16())); v4b != v4 {
		t.Fatalf("the IPv4 GID is at index %d on one host and %d on the other", v4, v4b)
	}
	for _, g := range []struct {
		name  string
		index int
	}{{"IPv4", v4}, {"IPv6 link-local", v6}} {
		t.Run(g.name+"/RC", func(t *testing.T) {
			a, b := hostPair(t, e, ibv.RC, g.index, 7)
			memcpy, rdma := pathCounters(t, a.dev)
			rcWorkload(t, a, b, 10)
			memcpy2, rdma2 := pathCounters(t, a.dev)
			if rdma2-rdma < 60 || memcpy2 != memcpy {
				t.Fatalf("path counters: rdma %d -> %d, memcpy %d -> %d: want 60 messages by rdma, none by memcpy", rdma, rdma2, memcpy, memcpy2)
			}
		})
		t.Run(g.name+"/UC", func(t *testing.T) {
			a, b := hostPair(t, e, ibv.UC, g.index, 7)
			for i := uint64(0); i < 5; i++ {
				src := fill(a.mr.Bytes()[srcOff:srcOff+2500], byte(i))
				postRecv(t, b.qp, recvWR(i, b.mr.SGE(recvOff, 2500)))
				post(t, a.qp, vrdma.SendWR{ID: i, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 2500)}})
				checkWC(t, pollOne(t, a.scq), sendWC(a, i, ibv.WCSend, 2500))
				checkWC(t, pollOne(t, b.rcq), recvWC(b, i, 2500, a))
				expectBytes(t, "UC SEND", b.mr.Bytes()[recvOff:recvOff+2500], src)
				src = fill(a.mr.Bytes()[srcOff:srcOff+2500], byte(i+9))
				post(t, a.qp, vrdma.SendWR{ID: i, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 2500)},
					RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
				checkWC(t, pollOne(t, a.scq), sendWC(a, i, ibv.WCRDMAWrite, 2500))
				arrived(t, ibv.UC, b.mr.Bytes()[rdmaOff:rdmaOff+2500], src)
				expectBytes(t, "UC WRITE", b.mr.Bytes()[rdmaOff:rdmaOff+2500], src)
			}
		})
		t.Run(g.name+"/UD", func(t *testing.T) {
			a, b := hostPair(t, e, ibv.UD, g.index, 7)
			for i := uint64(0); i < 5; i++ {
				src := fill(a.mr.Bytes()[srcOff:srcOff+1000], byte(i))
				postRecv(t, b.qp, recvWR(i, b.mr.SGE(recvOff, grhLen+1000)))
				post(t, a.qp, a.sendTo(vrdma.SendWR{ID: i, Opcode: ibv.WRSendImm, Imm: 7, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 1000)}}, b))
				checkWC(t, pollOne(t, a.scq), sendWC(a, i, ibv.WCSend, 1000))
				want := withImm(recvWC(b, i, grhLen+1000, a), 7)
				want.Flags |= ibv.WCWithGRH
				checkWC(t, pollOne(t, b.rcq), want)
				checkGRH(t, b.mr.Bytes()[recvOff:recvOff+grhLen], a.gid, b.gid)
				expectBytes(t, "UD SEND", b.mr.Bytes()[recvOff+grhLen:recvOff+grhLen+1000], src)
			}
		})
	}
	for _, loss := range []int{1, 5} {
		t.Run(fmt.Sprintf("RC under %d%% loss", loss), func(t *testing.T) {
			top.Hosts[0].SetLoss(t, loss)
			top.Hosts[1].SetLoss(t, loss)
			defer top.Hosts[0].SetLoss(t, 0)
			defer top.Hosts[1].SetLoss(t, 0)
			a, b := hostPair(t, e, ibv.RC, v4, 7)
			rcWorkload(t, a, b, 30)
			if top.Hosts[0].Dropped(t)+top.Hosts[1].Dropped(t) == 0 {
				t.Log("no packet was dropped this time")
			}
		})
	}
}

// pathCounters returns the messages dev's port sent by the memcpy and by
// the rdma path.
func pathCounters(t *testing.T, dev *vrdma.Device) (memcpy, rdma uint64) {
	t.Helper()
	p, err := dev.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	return p.Counters.PathMemcpy, p.Counters.PathRDMA
}
