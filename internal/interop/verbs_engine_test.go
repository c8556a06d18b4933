package interop

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// TestVerbsUplinkPingpong: in guest A, an instance bound to a verbs uplink
// on rxe0 (`vrdma vm create vm1 --uplink hca0`) runs rdma-core's
// ibv_rc_pingpong under vrdma's guest library (the environment `vrdma run
// --instance vm1` sets: LD_LIBRARY_PATH, VRDMA_SOCKET, VRDMA_INSTANCE;
// the guest has no compiler to build the library, so it is built here and
// shared), against the kernel's own ibv_rc_pingpong on rxe0, in both
// roles. The bytes go through the device: rxe0's sent_pkts rise by at
// least the messages' packets (the daemon has no software link in the
// guest at all, so its software path cannot carry them).
func TestVerbsUplinkPingpong(t *testing.T) {
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

	sent := func() int {
		out := g.Exec(t, "A", 30, "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("rxe0's sent_pkts: %q", out)
		}
		return n
	}
	const iters, size = 50, 4096
	native := fmt.Sprintf("ibv_rc_pingpong -d rxe0 -g %d -s %d -n %d", idx, size, iters)
	ours := fmt.Sprintf("LD_LIBRARY_PATH=/mnt/host/vrdma-lib VRDMA_SOCKET=%s VRDMA_INSTANCE=vm1 ibv_rc_pingpong -d vrdma0 -g %d -s %d -n %d -p 18516", sock, idx, size, iters)
	nativeSrv := native + " -p 18516"
	for _, tc := range []struct {
		name         string
		server, clnt string
	}{
		{"vrdma_client", nativeSrv, ours + " " + GuestIP("A").String()},
		{"vrdma_server", ours, nativeSrv + " " + GuestIP("A").String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := sent()
			srv := g.Spawn(t, "A", 240, tc.server)
			// Wait until the server listens on its port (-p 18516).
			if out, rc := g.awaitListen(t, "A", 18516); rc != 0 {
				sout, _ := g.Wait(t, "A", srv, 30)
				t.Fatalf("the server never listened (%d): %s\n%s", rc, out, sout)
			}
			cout, crc := g.Run(t, "A", 240, tc.clnt)
			sout, src := g.Wait(t, "A", srv, 240)
			t.Logf("server (exit %d):\n%s\nclient (exit %d):\n%s", src, sout, crc, cout)
			// The vrdma side ran on vrdma's adapter (its port has a LID from
			// the daemon; rxe's RoCE port reports none) with the device's QPN.
			ourOut := cout
			if tc.name == "vrdma_server" {
				ourOut = sout
			}
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
			// Each side sends iters messages of size bytes at MTU 1024.
			if d := sent() - before; d < 2*iters*size/1024 {
				t.Errorf("rxe0 sent %d packets, want at least %d: the bytes did not go through the device", d, 2*iters*size/1024)
			}
		})
	}

	// RDMA WRITEs and READs with perftest, both roles: under vrdma as the
	// client (the bound instance writes into / reads from the kernel's
	// server) and as the server (the kernel's client writes into / reads
	// from the bound instance's region, at the application's address it
	// was sent: the device's registration is at that iova).
	env := fmt.Sprintf("LD_LIBRARY_PATH=/mnt/host/vrdma-lib VRDMA_SOCKET=%s VRDMA_INSTANCE=vm1 ", sock)
	for i, tc := range []struct {
		tool   string
		vrdmaS bool
	}{
		{"ib_write_bw", false},
		{"ib_write_bw", true},
		{"ib_read_bw", false},
		{"ib_read_bw", true},
	} {
		role := "vrdma_client"
		if tc.vrdmaS {
			role = "vrdma_server"
		}
		t.Run(tc.tool+"_"+role, func(t *testing.T) {
			const n, sz = 20, 65536
			port := 18517 + i
			args := fmt.Sprintf("-x %d -s %d -n %d -p %d -F", idx, sz, n, port) // -F: no cycle-counter check (it gives up under load)
			native, vr := tc.tool+" -d rxe0 "+args, env+tc.tool+" -d vrdma0 "+args
			server, clnt := native, vr+" "+GuestIP("A").String()
			if tc.vrdmaS {
				server, clnt = vr, native+" "+GuestIP("A").String()
			}
			before := sent()
			srv := g.Spawn(t, "A", 240, server)
			if out, rc := g.awaitListen(t, "A", port); rc != 0 {
				sout, _ := g.Wait(t, "A", srv, 30)
				t.Fatalf("%s never listened (%d): %s\n%s", tc.tool, rc, out, sout)
			}
			cout, crc := g.Run(t, "A", 240, clnt)
			sout, src := g.Wait(t, "A", srv, 240)
			t.Logf("server (exit %d): %s\n%s\nclient (exit %d): %s\n%s", src, server, sout, crc, clnt, cout)
			// Both sides finish and print the report line for sz-byte messages
			// (perftest's client only after every WRITE or READ completed
			// successfully: a REM_ACCESS_ERR fails it).
			for _, o := range []struct {
				out string
				rc  int
			}{{sout, src}, {cout, crc}} {
				if o.rc != 0 || !strings.Contains(o.out, fmt.Sprintf(" %d ", sz)) {
					t.Errorf("%s: a side failed or printed no report line for %d bytes (exit %d)", tc.tool, sz, o.rc)
				}
			}
			if d := sent() - before; d < n*sz/1024 {
				t.Errorf("rxe0 sent %d packets, want at least %d: the bytes did not go through the device", d, n*sz/1024)
			}
		})
	}
	t.Run("srq_pingpong", func(t *testing.T) { checkSRQPingpong(t, g) }) // verbs_srq_test.go
}
