package interop

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/verbs"
)

// checkUDCM is TestVerbsUplinkCM's part for UD QPs (SIDR through the
// device's own CM): package verbs' TestCMUDOnDevice in guest A, with the
// helper as built and under ASan and UBSan (a UD listener, a SIDR_REQ with
// private data, the SIDR_REP naming a UD QP, the reply's QPN, Q_Key and
// address handle, a datagram through an AH made from it; a rejection and
// a port nobody listens on UNREACHABLE). Then Debian's udaddy under vrdma
// on an instance bound to rxe0 against the kernel's own udaddy on rxe0,
// both roles: the SIDR exchange through the kernel's CM, then udaddy's
// datagrams each way (the client's AH from the SIDR reply's ah_attr, the
// server's from the completion; each names its QP to the other in the
// immediate data), "test complete" on both sides and rxe0's packet counter
// rising. A native pair runs first: what the vrdma roles must match.
func checkUDCM(t *testing.T, g *Guests) {
	for _, h := range []string{verbs.HelperName, verbs.HelperName + "-cm-asan"} {
		t.Run("device_cm_ud/"+h, func(t *testing.T) {
			out, rc := g.Run(t, "A", 300, "VRDMA_VERBS_TEST_HELPER=/mnt/host/"+h+" VRDMA_VERBS_TEST_DEV=rxe0 /mnt/host/verbs-cm.test -test.run '^TestCMUDOnDevice$' -test.v")
			t.Logf("in guest A (exit %d):\n%s", rc, out)
			if rc != 0 || !strings.Contains(out, "--- PASS: TestCMUDOnDevice") {
				t.Errorf("TestCMUDOnDevice did not pass in guest A with %s (exit %d)", h, rc)
			}
		})
	}

	t.Run("udaddy", func(t *testing.T) {
		if out, rc := g.Run(t, "A", 30, "command -v udaddy"); rc != 0 {
			t.Skipf("the interop guest lacks udaddy: %s", out)
		}
		defer startGuestDaemon(t, g, "A", 900, "")()
		const sock = guestSock
		// The guest daemon keeps its links and instances: the rping check
		// before made these already.
		for _, cmd := range []string{"link --socket " + sock + " add hca0 type verbs dev rxe0", "vm create vm1 --socket " + sock + " --uplink hca0"} {
			if out, rc := g.Run(t, "A", 120, "/mnt/host/vrdma "+cmd); rc != 0 && !strings.Contains(out, "exists already") {
				t.Fatalf("vrdma %s: exit %d\n%s", cmd, rc, out)
			}
		}
		sent := func() int {
			out := g.Exec(t, "A", 30, "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts")
			n, err := strconv.Atoi(strings.TrimSpace(out))
			if err != nil {
				t.Fatalf("rxe0's sent_pkts: %q", out)
			}
			return n
		}
		env := fmt.Sprintf("LD_LIBRARY_PATH=/mnt/host/vrdma-lib VRDMA_SOCKET=%s VRDMA_INSTANCE=vm1 VRDMA_DEBUG=1 ", sock)
		const msgs = 10
		ip := GuestIP("A").String()
		for _, name := range []string{"native", "vrdma_client", "vrdma_server"} {
			t.Run(name, func(t *testing.T) {
				const port = 7174 // udaddy's own (its -p is the port space)
				server := fmt.Sprintf("udaddy -b %s -C %d", ip, msgs)
				client := fmt.Sprintf("udaddy -s %s -C %d", ip, msgs)
				switch name {
				case "vrdma_server":
					server = env + server
				case "vrdma_client":
					client = env + client
				}
				before := sent()
				srv := g.Spawn(t, "A", 240, server)
				if out, rc := g.Run(t, "A", 120, fmt.Sprintf("i=0; until rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q ':%d'; do i=$((i+1)); [ $i -gt 600 ] && exit 1; sleep 0.1; done", port)); rc != 0 {
					sout, _ := g.Wait(t, "A", srv, 30)
					t.Fatalf("the udaddy server never listened (%d): %s\n%s", rc, out, sout)
				}
				cout, crc := g.Run(t, "A", 240, client)
				sout, src := g.Wait(t, "A", srv, 240)
				t.Logf("server (exit %d): %s\n%s\nclient (exit %d): %s\n%s", src, server, sout, crc, client, cout)
				if src != 0 || crc != 0 || !strings.Contains(sout, "test complete") || !strings.Contains(cout, "test complete") {
					t.Errorf("udaddy failed: server exit %d, client exit %d (want 0 and \"test complete\" on both)", src, crc)
				}
				// The SIDR_REQ and SIDR_REP, and the messages each way.
				if d := sent() - before; d < 2*msgs+2 {
					t.Errorf("rxe0 sent %d packets, want at least %d: the datagrams did not go through the device", d, 2*msgs+2)
				}
			})
		}
	})
}
