package interop

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest"
)

// checkSRQPingpong runs Debian's ibv_srq_pingpong under vrdma on guest A's
// instance vm1, bound to verbs uplink hca0 on rxe0 (TestVerbsUplinkPingpong
// made both), against the kernel's own ibv_srq_pingpong on rxe0, both
// roles, with its default 16 QPs on one SRQ: both sides finish their
// iterations, the vrdma side prints vrdma's LID (it ran on vrdma's
// adapter) and rxe0's sent_pkts rise by at least the messages' packets at
// MTU 1024 (the device carried them). The SRQ's receives reach the device
// SRQ through its doorbell before the peer sends, and come back in any
// order across the 16 QPs (docs/design/verbs-uplink-binding.md, "SRQs on
// the device"). Then testdata/srq_limit under vrdma on the same instance:
// the SRQ's limit armed and read back on the device, its limit event
// reaching the program as the SRQ's, the SRQ's receives outliving a QP on
// it that went to ERR, and the destroys.
func checkSRQPingpong(t *testing.T, g *Guests) {
	idx := GIDIndex(GIDs(g.Exec(t, "A", 60, "ibv_devinfo -v -d rxe0")), netip.AddrFrom16(GuestIP("A").As16()))
	if idx < 0 {
		t.Fatalf("rxe0 has no GID for %s", GuestIP("A"))
	}
	sent := func() int {
		out := g.Exec(t, "A", 30, "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("rxe0's sent_pkts: %q", out)
		}
		return n
	}
	// 16 QPs (the default -q) share one SRQ on each side; the iterations
	// count messages over all of them.
	const iters, size, port = 160, 4096, 18530
	args := fmt.Sprintf("-g %d -s %d -n %d -p %d", idx, size, iters, port)
	native := "ibv_srq_pingpong -d rxe0 " + args
	ours := fmt.Sprintf("LD_LIBRARY_PATH=/mnt/host/vrdma-lib VRDMA_SOCKET=%s VRDMA_INSTANCE=vm1 ibv_srq_pingpong -d vrdma0 %s", guestSock, args)
	for _, tc := range []struct {
		name         string
		server, clnt string
	}{
		{"vrdma_client", native, ours + " " + GuestIP("A").String()},
		{"vrdma_server", ours, native + " " + GuestIP("A").String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := sent()
			srv := g.Spawn(t, "A", 300, tc.server)
			if out, rc := g.awaitListen(t, "A", port); rc != 0 {
				sout, _ := g.Wait(t, "A", srv, 30)
				t.Fatalf("the server never listened (%d): %s\n%s", rc, out, sout)
			}
			cout, crc := g.Run(t, "A", 300, tc.clnt)
			sout, src := g.Wait(t, "A", srv, 300)
			t.Logf("server (exit %d): %s\n%s\nclient (exit %d): %s\n%s", src, tc.server, sout, crc, tc.clnt, cout)
			ourOut := cout
			if tc.name == "vrdma_server" {
				ourOut = sout
			}
			if strings.Contains(ourOut, "local address:  LID 0x0000") || !strings.Contains(ourOut, "local address:") {
				t.Errorf("the vrdma side reports rxe0's LID 0 or no address: it did not run on vrdma's adapter")
			}
			for _, o := range []struct {
				out string
				rc  int
			}{{sout, src}, {cout, crc}} {
				if o.rc != 0 || !strings.Contains(o.out, fmt.Sprintf("%d iters in", iters)) {
					t.Errorf("a side did not finish its %d iterations (exit %d)", iters, o.rc)
				}
			}
			if d := sent() - before; d < 2*iters*size/1024 {
				t.Errorf("rxe0 sent %d packets, want at least %d: the bytes did not go through the device", d, 2*iters*size/1024)
			}
		})
	}

	t.Run("srq_limit", func(t *testing.T) {
		prog, err := guest.BuildProgram(t.TempDir(), guest.Program{Name: "srq_limit", Src: os.DirFS("testdata/srq_limit"),
			Header: "infiniband/verbs.h", Package: "libibverbs-dev", Libs: []string{"-libverbs"}})
		if err != nil {
			t.Fatalf("building testdata/srq_limit: %v", err)
		}
		if err := copyExecutable(prog, filepath.Join(g.share("A"), "srq_limit")); err != nil {
			t.Fatal(err)
		}
		env := fmt.Sprintf("LD_LIBRARY_PATH=/mnt/host/vrdma-lib VRDMA_SOCKET=%s VRDMA_INSTANCE=vm1 ", guestSock)
		before := sent()
		out, rc := g.Run(t, "A", 300, fmt.Sprintf("%s/mnt/host/srq_limit vrdma0 %d 2>&1", env, idx))
		t.Logf("srq_limit (exit %d):\n%s", rc, out)
		for _, l := range []string{"limit ok", "err-keeps ok", "destroy ok"} {
			if rc != 0 || !strings.Contains(out, l) {
				t.Errorf("srq_limit did not print %q (exit %d)", l, rc)
			}
		}
		if d := sent() - before; d < 6 {
			t.Errorf("rxe0 sent %d packets, want at least the 6 SENDs: they did not go through the device", d)
		}
	})
}
