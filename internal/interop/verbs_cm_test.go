package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/verbs"
)

// TestVerbsUplinkCM: rdma_cm through the device's own CM in guest A (the
// kernel's rdma_cm on rxe0, driven by the helper through the host's
// librdmacm). First package verbs' TestCMOnDevice, with the helper as it
// is built and built under ASan and UBSan: two device QPs connected
// through the device's CM (listen, connect, request, accept, RTU,
// disconnect, reject), SENDs both ways. Then Debian's rping under vrdma
// on an instance bound to rxe0 (`vrdma vm create vm1 --uplink hca0`)
// against the kernel's own rping on rxe0, both roles, its data verified
// (-V) and its pings printed on both sides, rxe0's packet counter rising:
// the CM's messages and the pings went through the device.
// Then UD: SIDR through the device's CM and udaddy (checkUDCM).
func TestVerbsUplinkCM(t *testing.T) {
	Require(t)
	k := buildVerbsKit(t, true)
	g := sharedGuests(t, "A")
	k.install(t, g, "A")
	share := g.share("A")
	testBin := filepath.Join(share, "verbs-cm.test")
	build := exec.Command("go", "test", "-c", "-o", testBin, "./internal/verbs")
	build.Dir = k.root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./internal/verbs: %v\n%s", err, out)
	}
	asan := filepath.Join(share, verbs.HelperName+"-cm-asan")
	if err := buildSanitizedHelper(asan); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{verbs.HelperName, filepath.Base(asan)} {
		t.Run("device_cm/"+h, func(t *testing.T) {
			out, rc := g.Run(t, "A", 300, "VRDMA_VERBS_TEST_HELPER=/mnt/host/"+h+" VRDMA_VERBS_TEST_DEV=rxe0 /mnt/host/verbs-cm.test -test.run '^TestCMOnDevice$' -test.v")
			t.Logf("in guest A (exit %d):\n%s", rc, out)
			if rc != 0 || !strings.Contains(out, "--- PASS: TestCMOnDevice") {
				t.Errorf("TestCMOnDevice did not pass in guest A with %s (exit %d)", h, rc)
			}
		})
	}

	t.Run("rping", func(t *testing.T) {
		if out, rc := g.Run(t, "A", 30, "command -v rping"); rc != 0 {
			t.Skipf("the interop guest lacks rping: %s", out)
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
		env := fmt.Sprintf("LD_LIBRARY_PATH=/mnt/host/vrdma-lib VRDMA_SOCKET=%s VRDMA_INSTANCE=vm1 ", sock)
		const pings = 10
		ip := GuestIP("A").String()
		for i, vrdmaServer := range []bool{false, true} {
			name := "vrdma_client"
			if vrdmaServer {
				name = "vrdma_server"
			}
			t.Run(name, func(t *testing.T) {
				port := 7181 + i
				args := fmt.Sprintf(" -a %s -p %d -C %d -v -V", ip, port, pings)
				server, client := "rping -s"+args, env+"rping -c"+args
				if vrdmaServer {
					server, client = env+"rping -s"+args, "rping -c"+args
				}
				before := sent()
				srv := g.Spawn(t, "A", 240, server)
				// An rdma_cm listener shows in the kernel's cm_id table (the
				// vrdma one too: the helper listens through the kernel).
				if out, rc := g.Run(t, "A", 120, fmt.Sprintf("i=0; until rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q ':%d'; do i=$((i+1)); [ $i -gt 600 ] && exit 1; sleep 0.1; done", port)); rc != 0 {
					sout, _ := g.Wait(t, "A", srv, 30)
					t.Fatalf("the rping server never listened (%d): %s\n%s", rc, out, sout)
				}
				cout, crc := g.Run(t, "A", 240, client)
				sout, src := g.Wait(t, "A", srv, 240)
				t.Logf("server (exit %d): %s\n%s\nclient (exit %d): %s\n%s", src, server, sout, crc, client, cout)
				if src != 0 || crc != 0 {
					t.Errorf("rping failed: server exit %d, client exit %d", src, crc)
				}
				if err := checkPings(sout, "server ping data: ", pings); err != nil {
					t.Errorf("server: %v", err)
				}
				if err := checkPings(cout, "ping data: ", pings); err != nil {
					t.Errorf("client: %v", err)
				}
				// Each ping is a SEND, an RDMA READ, a SEND and an RDMA WRITE
				// each way, and the CM's REQ, REP and RTU: at least 4 packets
				// a ping.
				if d := sent() - before; d < 4*pings {
					t.Errorf("rxe0 sent %d packets, want at least %d: the pings did not go through the device", d, 4*pings)
				}
			})
		}
	})
	checkUDCM(t, g) // verbs_cm_ud_test.go: UD (SIDR) through the device's CM
}
