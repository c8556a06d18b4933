package interop

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// TestVerbsUplinkUDPingpong: in guest A, an instance bound to a verbs
// uplink on rxe0 runs rdma-core's ibv_ud_pingpong under vrdma's guest
// library against the kernel's own ibv_ud_pingpong on rxe0, in both roles:
// the vrdma side's UD QP is rxe0's (its QPN), its address handle is rxe0's
// (ibv_create_ah with the GRH), its receives get the 40-byte GRH in front
// of the payload from the device. rxe0's sent_pkts and rcvd_pkts rise by
// at least the datagrams both sides send (the daemon has no software link
// in the guest, so its software path cannot carry them).
func TestVerbsUplinkUDPingpong(t *testing.T) {
	Require(t)
	k := buildVerbsKit(t, true)
	g := sharedGuests(t, "A")
	k.install(t, g, "A")
	want := GIDs(g.Exec(t, "A", 60, "ibv_devinfo -v -d rxe0"))
	idx := GIDIndex(want, netip.AddrFrom16(GuestIP("A").As16()))
	if idx < 0 {
		t.Fatalf("rxe0 has no GID for %s: %v", GuestIP("A"), want)
	}
	defer startGuestDaemon(t, g, "A", 900, "")()
	const sock = guestSock
	g.Exec(t, "A", 120, "/mnt/host/vrdma link --socket "+sock+" add hca0 type verbs dev rxe0")
	g.Exec(t, "A", 120, "/mnt/host/vrdma vm create vm1 --socket "+sock+" --uplink hca0")

	counter := func(name string) int {
		out := g.Exec(t, "A", 30, "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/"+name)
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("rxe0's %s: %q", name, out)
		}
		return n
	}
	const iters, size = 50, 512 // a datagram within rxe0's MTU of 1024
	native := fmt.Sprintf("ibv_ud_pingpong -d rxe0 -g %d -s %d -n %d -p 18530", idx, size, iters)
	ours := fmt.Sprintf("LD_LIBRARY_PATH=/mnt/host/vrdma-lib VRDMA_SOCKET=%s VRDMA_INSTANCE=vm1 ibv_ud_pingpong -d vrdma0 -g %d -s %d -n %d -p 18530", sock, idx, size, iters)
	for _, tc := range []struct {
		name         string
		server, clnt string
	}{
		{"vrdma_client", native, ours + " " + GuestIP("A").String()},
		{"vrdma_server", ours, native + " " + GuestIP("A").String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent, rcvd := counter("sent_pkts"), counter("rcvd_pkts")
			srv := g.Spawn(t, "A", 240, tc.server)
			// Wait until the server listens on its port (-p 18530).
			if out, rc := g.awaitListen(t, "A", 18530); rc != 0 {
				sout, _ := g.Wait(t, "A", srv, 30)
				t.Fatalf("the server never listened (%d): %s\n%s", rc, out, sout)
			}
			cout, crc := g.Run(t, "A", 240, tc.clnt)
			sout, src := g.Wait(t, "A", srv, 240)
			t.Logf("server (exit %d):\n%s\nclient (exit %d):\n%s", src, sout, crc, cout)
			ourOut := cout
			if tc.name == "vrdma_server" {
				ourOut = sout
			}
			// The vrdma side ran on vrdma's adapter: its port has a LID from
			// the daemon (rxe's RoCE port reports none).
			if strings.Contains(ourOut, "local address:  LID 0x0000") {
				t.Errorf("the vrdma side reports rxe0's LID 0: it did not run on vrdma's adapter")
			}
			for _, o := range []struct {
				out string
				rc  int
			}{{sout, src}, {cout, crc}} {
				if o.rc != 0 || !strings.Contains(o.out, fmt.Sprintf("%d iters in", iters)) {
					t.Errorf("a side did not finish its %d iterations (exit %d)", iters, o.rc)
				}
			}
			// Each side sends iters datagrams of one packet each, and
			// receives the other's.
			if d := counter("sent_pkts") - sent; d < 2*iters {
				t.Errorf("rxe0 sent %d packets, want at least %d: the datagrams did not go through the device", d, 2*iters)
			}
			if d := counter("rcvd_pkts") - rcvd; d < 2*iters {
				t.Errorf("rxe0 received %d packets, want at least %d", d, 2*iters)
			}
		})
	}
}
