package interop

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestVerbsUplinkTwoGuests: two guests on one bridge, each running a vrdma
// daemon with a verbs uplink on its rxe0 (`vrdma link add hca0 type verbs
// dev rxe0`) and an instance bound to it (`vrdma vm create vmA --uplink
// hca0`, vmB in B); the daemons form one switch (A's runs the etcd
// member, B's joins it over the bridge), so `vrdma path vmA vmB` names the
// devices. rdma-core's ibv_rc_pingpong and perftest's ib_write_bw run
// under vrdma's guest library on both sides (the environment `vrdma run
// --instance` sets), each guest the server once. The bytes go through the
// devices: both rxe0s' sent_pkts and rcvd_pkts rise by at least the
// payload's packets at MTU 1024, while the daemons' own counters of what
// the engine moved (the adapters' port_xmit_data/port_rcv_data and
// path_rdma/path_tcp, `vrdma stat`) stay flat, and so would a software
// rxe link's tx counters where one could be added beside the kernel's rxe
// (in these guests it cannot: rdma_rxe holds UDP port 4791 on eth0's
// addresses, and link add says so).
func TestVerbsUplinkTwoGuests(t *testing.T) {
	k := buildVerbsKit(t, true)
	g := sharedGuests(t, "A", "B")
	guests := []string{"A", "B"}
	idx := map[string]int{}
	for _, n := range guests {
		k.install(t, g, n)
		gids := GIDs(g.Exec(t, n, 60, "ibv_devinfo -v -d rxe0"))
		if idx[n] = GIDIndex(gids, netip.AddrFrom16(GuestIP(n).As16())); idx[n] < 0 {
			t.Fatalf("rxe0 in guest %s has no GID for %s: %v", n, GuestIP(n), gids)
		}
	}
	ipA, ipB := GuestIP("A").String(), GuestIP("B").String()
	// One switch over the guests' bridge, without TLS (--insecure: the
	// bridge is the test's own).
	defer startGuestDaemon(t, g, "A", 1500, "--host-name A --insecure --etcd-client-url http://"+ipA+":2379 --tcp-listen "+ipA+":4792 --tcp-addr "+ipA)()
	defer startGuestDaemon(t, g, "B", 1500, "--host-name B --insecure --etcd-endpoints http://"+ipA+":2379 --tcp-listen "+ipB+":4792 --tcp-addr "+ipB)()
	vrdma := func(n, cmd, args string) (string, int) {
		return g.Run(t, n, 120, "/mnt/host/vrdma "+cmd+" --socket "+guestSock+" "+args)
	}
	inst := map[string]string{"A": "vmA", "B": "vmB"}
	soft := map[string]bool{} // a software rxe link sw0 could be added
	for _, n := range guests {
		if out, rc := vrdma(n, "link", "add hca0 type verbs dev rxe0"); rc != 0 {
			t.Fatalf("link add hca0 in guest %s (%d): %s", n, rc, out)
		}
		if out, rc := vrdma(n, "vm create "+inst[n], "--uplink hca0"); rc != 0 {
			t.Fatalf("vm create %s --uplink hca0 in guest %s (%d): %s", inst[n], n, rc, out)
		}
		// vrdma's software RoCEv2 on the netdev the kernel's rxe0 is on.
		out, rc := vrdma(n, "link", "add sw0 type rxe netdev eth0")
		show, _ := vrdma(n, "link", "show sw0")
		soft[n] = rc == 0 && strings.Contains(show, "state ACTIVE")
		t.Logf("guest %s: a software rxe link beside the kernel's rxe0 on eth0 (exit %d): %s\n%s", n, rc, out, show)
	}

	// The switch: A's daemon sees B's instance bound to hca0, and the path
	// between the two bound instances is the devices.
	t.Run("path", func(t *testing.T) {
		out, rc := g.Run(t, "A", 120, "i=0; until /mnt/host/vrdma path --socket "+guestSock+" vmA vmB 2>&1 | grep -q '^verbs: '; do i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.2; done; /mnt/host/vrdma path --socket "+guestSock+" vmA vmB")
		t.Logf("vrdma path vmA vmB in guest A (exit %d): %s", rc, out)
		want := "verbs: vmA/vrdma0 is bound to verbs uplink hca0 (rxe0 on host A) and vmB/vrdma0 is bound to verbs uplink hca0 (rxe0 on host B) on port group default: their QPs are the devices', RoCE v2"
		if rc != 0 || strings.TrimSpace(out) != want {
			t.Errorf("vrdma path vmA vmB = %q (exit %d), want %q", out, rc, want)
		}
		hosts, _ := vrdma("B", "host show", "")
		t.Logf("vrdma host show in guest B:\n%s", hosts)
		if !strings.Contains(hosts, "    bound to hca0: to bound instances verbs: ") {
			t.Errorf("host show in guest B names no device path for instances bound to hca0:\n%s", hosts)
		}
	})

	hw := func(n, c string) int {
		out := g.Exec(t, n, 30, "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/"+c)
		v, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("rxe0's %s in guest %s: %q", c, n, out)
		}
		return v
	}
	// The daemons' counters of what their engines and software links moved.
	engine := func(n string) map[string]int {
		out := g.Exec(t, n, 60, "VRDMA_SOCKET="+guestSock+" VRDMA_INSTANCE="+inst[n]+" /mnt/host/vrdma stat vrdma0")
		c := map[string]int{}
		for _, name := range []string{"port_xmit_data", "port_rcv_data", "path_rdma", "path_tcp"} {
			m := regexp.MustCompile(`(?m)^\s*` + name + `: (\d+)$`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("vrdma stat in guest %s has no %s:\n%s", n, name, out)
			}
			c[name], _ = strconv.Atoi(m[1])
		}
		if soft[n] {
			show, _ := vrdma(n, "link", "show sw0")
			m := regexp.MustCompile(`tx_packets (\d+) tx_bytes (\d+)`).FindStringSubmatch(show)
			if m == nil {
				t.Fatalf("link show sw0 in guest %s has no tx counters:\n%s", n, show)
			}
			c["sw0 tx_packets"], _ = strconv.Atoi(m[1])
			c["sw0 tx_bytes"], _ = strconv.Atoi(m[2])
		}
		return c
	}
	env := func(n string) string {
		return "LD_LIBRARY_PATH=/mnt/host/vrdma-lib VRDMA_SOCKET=" + guestSock + " VRDMA_INSTANCE=" + inst[n] + " "
	}
	const iters, size = 50, 4096 // ibv_rc_pingpong: each side sends iters messages of size bytes
	const n, sz = 20, 65536      // ib_write_bw: the client writes n messages of sz bytes
	for i, tc := range []struct {
		tool, server string
	}{
		{"ibv_rc_pingpong", "B"},
		{"ibv_rc_pingpong", "A"},
		{"ib_write_bw", "B"},
		{"ib_write_bw", "A"},
	} {
		srv, cl := tc.server, map[string]string{"A": "B", "B": "A"}[tc.server]
		t.Run(fmt.Sprintf("%s_server_%s", tc.tool, srv), func(t *testing.T) {
			port := 18516 + i
			args := func(g string) string {
				if tc.tool == "ibv_rc_pingpong" {
					return fmt.Sprintf("-d vrdma0 -g %d -s %d -n %d -p %d", idx[g], size, iters, port)
				}
				// No -m: perftest takes the port's active MTU, which a bound
				// adapter reports as its device's (rxe0 on eth0: 1024).
				return fmt.Sprintf("-d vrdma0 -x %d -s %d -n %d -p %d -F", idx[g], sz, n, port) // -F: no cycle-counter check (it gives up under load)
			}
			// What the client sends and the server receives, at least (and,
			// for the pingpong, the other way too), in packets at MTU 1024.
			pkts := n * sz / 1024
			if tc.tool == "ibv_rc_pingpong" {
				pkts = iters * size / 1024
			}
			sentBefore := map[string]int{srv: hw(srv, "sent_pkts"), cl: hw(cl, "sent_pkts")}
			rcvdBefore := map[string]int{srv: hw(srv, "rcvd_pkts"), cl: hw(cl, "rcvd_pkts")}
			engBefore := map[string]map[string]int{srv: engine(srv), cl: engine(cl)}
			server := env(srv) + tc.tool + " " + args(srv)
			client := env(cl) + tc.tool + " " + args(cl) + " " + GuestIP(srv).String()
			sid := g.Spawn(t, srv, 300, server)
			if out, rc := g.awaitListen(t, srv, port); rc != 0 {
				sout, _ := g.Wait(t, srv, sid, 30)
				t.Fatalf("%s in guest %s never listened (%d): %s\n%s", tc.tool, srv, rc, out, sout)
			}
			cout, crc := g.Run(t, cl, 300, client)
			sout, src := g.Wait(t, srv, sid, 300)
			t.Logf("server in guest %s (exit %d): %s\n%s\nclient in guest %s (exit %d): %s\n%s", srv, src, server, sout, cl, crc, client, cout)
			done := fmt.Sprintf("%d iters in", iters)
			if tc.tool == "ib_write_bw" {
				done = fmt.Sprintf(" %d ", sz)
			}
			for _, o := range []struct {
				who, out string
				rc       int
			}{{"server", sout, src}, {"client", cout, crc}} {
				if o.rc != 0 || !strings.Contains(o.out, done) {
					t.Errorf("%s's %s failed or did not finish (exit %d; want %q in its output)", tc.tool, o.who, o.rc, done)
				}
				if tc.tool == "ibv_rc_pingpong" && strings.Contains(o.out, "local address:  LID 0x0000") {
					t.Errorf("the %s reports rxe0's LID 0: it did not run on vrdma's adapter", o.who)
				}
			}
			moved := map[string][2]int{} // guest: sent, received
			for _, gn := range []string{srv, cl} {
				moved[gn] = [2]int{hw(gn, "sent_pkts") - sentBefore[gn], hw(gn, "rcvd_pkts") - rcvdBefore[gn]}
			}
			t.Logf("rxe0 packets (sent, received): guest %s %v, guest %s %v; at least %d each way", srv, moved[srv], cl, moved[cl], pkts)
			if moved[cl][0] < pkts || moved[srv][1] < pkts {
				t.Errorf("client %s's rxe0 sent %d and server %s's received %d packets, want at least %d each: the bytes did not go through the devices", cl, moved[cl][0], srv, moved[srv][1], pkts)
			}
			if tc.tool == "ibv_rc_pingpong" && (moved[srv][0] < pkts || moved[cl][1] < pkts) {
				t.Errorf("server %s's rxe0 sent %d and client %s's received %d packets, want at least %d each", srv, moved[srv][0], cl, moved[cl][1], pkts)
			}
			for _, gn := range []string{srv, cl} {
				after := engine(gn)
				for c, v := range after {
					if v != engBefore[gn][c] {
						t.Errorf("guest %s: the daemon's %s moved from %d to %d: its engine or software link carried traffic", gn, c, engBefore[gn][c], v)
					}
				}
			}
		})
	}
}
