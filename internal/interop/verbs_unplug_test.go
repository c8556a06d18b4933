package interop

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/verbs"
)

// TestVerbsUplinkUnplug: in guest A, an instance bound to a verbs uplink on
// rxe0 runs ibv_rc_pingpong under vrdma against the kernel's own
// ibv_rc_pingpong on rxe0, with far more iterations than it can finish;
// during the transfer `rdma link delete rxe0` removes the device. The
// vrdma side's outstanding requests complete with an error (the device's
// flushes, IBV_WC_WR_FLUSH_ERR) and it exits with an error instead of
// hanging; the helper closes the device (rxe sends no DEVICE_FATAL: the
// helper sees its uverbs node go), so the removal finishes once the
// kernel's own tool, which rxe tells nothing, is ended; the daemon keeps
// running and `vrdma link show` shows hca0 down with the reason; a new QP
// on the instance is refused naming the link.
func TestVerbsUplinkUnplug(t *testing.T) {
	Require(t)
	k := buildVerbsKit(t, true)
	g := sharedGuests(t, "A")
	k.install(t, g, "A")
	gids := GIDs(g.Exec(t, "A", 60, "ibv_devinfo -v -d rxe0"))
	idx := GIDIndex(gids, netip.AddrFrom16(GuestIP("A").As16()))
	if idx < 0 {
		t.Fatalf("rxe0 has no GID for %s: %v", GuestIP("A"), gids)
	}
	defer startGuestDaemon(t, g, "A", 900, "")()
	const sock = guestSock
	vr := "/mnt/host/vrdma"
	g.Exec(t, "A", 120, vr+" link --socket "+sock+" add hca0 type verbs dev rxe0")
	g.Exec(t, "A", 120, vr+" vm create vm1 --socket "+sock+" --uplink hca0")

	sent := func() int {
		out, rc := g.Run(t, "A", 30, "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if rc != 0 || err != nil {
			return -1
		}
		return n
	}
	// Far more iterations than the test waits for: the transfer is running
	// when the device goes.
	const iters, size, port = 100000000, 4096, 18540
	env := fmt.Sprintf("LD_LIBRARY_PATH=/mnt/host/vrdma-lib VRDMA_SOCKET=%s VRDMA_INSTANCE=vm1 ", sock)
	srv := g.Spawn(t, "A", 600, fmt.Sprintf("ibv_rc_pingpong -d rxe0 -g %d -s %d -n %d -p %d", idx, size, iters, port))
	if out, rc := g.awaitListen(t, "A", port); rc != 0 {
		sout, _ := g.Wait(t, "A", srv, 30)
		t.Fatalf("the kernel's ibv_rc_pingpong never listened (%d): %s\n%s", rc, out, sout)
	}
	before := sent()
	cli := g.Spawn(t, "A", 600, env+fmt.Sprintf("ibv_rc_pingpong -d vrdma0 -g %d -s %d -n %d -p %d %s", idx, size, iters, port, GuestIP("A")))
	// The transfer runs: rxe0 has sent a few hundred packets more.
	if out, rc := g.Run(t, "A", 300, fmt.Sprintf("b=%d; i=0; until [ $(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts) -gt $((b+400)) ]; do i=$((i+1)); [ $i -gt 1200 ] && exit 1; sleep 0.2; done", before)); rc != 0 {
		cout, _ := g.Wait(t, "A", cli, 10)
		t.Fatalf("the transfer did not start (%d): %s\nvrdma side:\n%s", rc, out, cout)
	}

	del := g.Spawn(t, "A", 600, "rdma link delete rxe0")
	cout, crc := g.Wait(t, "A", cli, 300)
	t.Logf("the vrdma side (exit %d):\n%s", crc, cout)
	switch {
	case crc == 124:
		t.Errorf("the vrdma side still runs 300 s after rxe0 was deleted: it hangs")
	case crc == 0:
		t.Errorf("the vrdma side exited 0 after rxe0 was deleted under it")
	case !strings.Contains(cout, "Failed status"):
		t.Errorf("the vrdma side exited %d without an error completion (\"Failed status ...\")", crc)
	}
	// The helper closed the device (it saw the device go and exited), so
	// the kernel does not wait for the daemon.
	if out, rc := g.Run(t, "A", 120, "i=0; while pidof "+verbs.HelperName+" >/dev/null; do i=$((i+1)); [ $i -gt 500 ] && exit 1; sleep 0.2; done"); rc != 0 {
		t.Errorf("the verbs helper still has rxe0 open after its deletion (%d): %s", rc, out)
	}
	// rxe sends the kernel's own tool no event either (rdma_rxe has no
	// disassociate_ucontext): it waits for its peer's next message
	// forever, and the kernel waits for it to close rxe0. It is ended, as
	// an operator would.
	if g.Done("A", del) {
		t.Logf("rdma link delete finished before the kernel's tool ended")
	}
	g.Run(t, "A", 30, "kill $(pidof ibv_rc_pingpong) 2>/dev/null")
	sout, src := g.Wait(t, "A", srv, 60)
	t.Logf("the kernel's side (exit %d):\n%s", src, sout)
	dout, drc := g.Wait(t, "A", del, 300)
	if drc != 0 {
		t.Errorf("rdma link delete rxe0 exited %d (124: it still waits, for the helper?): %s", drc, dout)
	}
	if out, _ := g.Run(t, "A", 30, "rdma link show"); strings.Contains(out, "rxe0") {
		t.Errorf("rxe0 is still there after its deletion: %s", out)
	}

	// The daemon survives, and says why the link is down.
	if out, rc := g.Run(t, "A", 30, "pidof vrdma"); rc != 0 {
		t.Fatalf("the daemon is gone after its device went (%d): %s", rc, out)
	}
	out, rc := g.Run(t, "A", 60, vr+" link --socket "+sock+" show")
	t.Logf("vrdma link show:\n%s", out)
	if rc != 0 || !strings.Contains(out, "hca0") || !strings.Contains(out, "state DOWN") || !strings.Contains(out, "went away") {
		t.Errorf("vrdma link show after rxe0 went (%d): want hca0 down with the reason", rc)
	}
	// New objects on the bound instance are refused, naming the link (the
	// library prints the daemon's reason with VRDMA_DEBUG; ibv_rc_pingpong
	// registers its region before it makes its QP).
	out, rc = g.Run(t, "A", 120, "VRDMA_DEBUG=1 "+env+fmt.Sprintf("ibv_rc_pingpong -d vrdma0 -g %d -s %d -n 1 -p %d %s", idx, size, port+1, GuestIP("A")))
	t.Logf("ibv_rc_pingpong on vm1 again (exit %d):\n%s", rc, out)
	if rc == 0 || rc == 124 || !strings.Contains(out, "Couldn't register MR") || !strings.Contains(out, "verbs link hca0 is down") || !strings.Contains(out, "type verbs dev rxe0") {
		t.Errorf("a new region on the instance after its link went down: exit %d, want ibv_reg_mr to fail saying verbs link hca0 is down and how to re-add it", rc)
	}
}
