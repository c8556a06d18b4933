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

// TestVerbsUplinkInlineDepth: in guest A, an instance bound to a verbs
// uplink on rxe0 runs testdata/inline_depth under vrdma's guest library:
// with its QP's depth of unsignaled requests done by the device (no
// signaled completion after them frees their slots) one more is refused
// with ENOMEM; the depth kept outstanding for 300 rounds never
// fails; a 48-byte IBV_SEND_INLINE SEND from a buffer in no region arrives
// byte for byte. And perftest's ib_send_bw and ib_write_bw at 64 bytes,
// keeping its send queue (tx depth 128) outstanding for a thousand
// iterations, against the kernel's own tool on rxe0, both roles. (perftest
// posts inline only on devices it knows — "Device not recognized to
// implement inline feature. Disabling it" for rxe and vrdma alike — so its
// runs here are not inline; inline_depth is.) Before inline sends went to the device they completed
// with LOC_QP_OP_ERR; before the send slots were freed at completion the
// client's posts past the device's depth failed the QP with ENOMEM.
func TestVerbsUplinkInlineDepth(t *testing.T) {
	Require(t)
	k := buildVerbsKit(t, true)
	prog, err := guest.BuildProgram(t.TempDir(), guest.Program{Name: "inline_depth", Src: os.DirFS("testdata/inline_depth"),
		Header: "infiniband/verbs.h", Package: "libibverbs-dev", Libs: []string{"-libverbs"}})
	if err != nil {
		t.Fatalf("building testdata/inline_depth: %v", err)
	}
	g := sharedGuests(t, "A")
	k.install(t, g, "A")
	if err := copyExecutable(prog, filepath.Join(g.share("A"), "inline_depth")); err != nil {
		t.Fatal(err)
	}
	want := GIDs(g.Exec(t, "A", 60, "ibv_devinfo -v -d rxe0"))
	idx := GIDIndex(want, netip.AddrFrom16(GuestIP("A").As16()))
	if idx < 0 {
		t.Fatalf("rxe0 has no GID for %s: %v", GuestIP("A"), want)
	}
	defer startGuestDaemon(t, g, "A", 1500, "")()
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
	// listening waits until a server listens on port (its TCP exchange).
	listening := func(t *testing.T, port int, srv string) {
		t.Helper()
		if out, rc := g.awaitListen(t, "A", port); rc != 0 {
			sout, _ := g.Wait(t, "A", srv, 30)
			t.Fatalf("the server on port %d never listened (%d): %s\n%s", port, rc, out, sout)
		}
	}

	t.Run("inline_depth", func(t *testing.T) {
		before := sent()
		out, rc := g.Run(t, "A", 300, fmt.Sprintf("%s/mnt/host/inline_depth vrdma0 %d 2>&1", env, idx))
		t.Logf("inline_depth (exit %d):\n%s", rc, out)
		for _, l := range []string{"depth ok", "rounds ok", "inline ok"} {
			if rc != 0 || !strings.Contains(out, l) {
				t.Errorf("inline_depth did not print %q (exit %d)", l, rc)
			}
		}
		if d := sent() - before; d < 300 {
			t.Errorf("rxe0 sent %d packets, want at least 300: the requests did not go through the device", d)
		}
	})

	for i, tc := range []struct {
		tool   string
		vrdmaS bool
	}{
		{"ib_send_bw", false},
		{"ib_send_bw", true},
		{"ib_write_bw", false},
		{"ib_write_bw", true},
	} {
		role := "vrdma_client"
		if tc.vrdmaS {
			role = "vrdma_server"
		}
		t.Run(tc.tool+"_"+role, func(t *testing.T) {
			// 64 bytes; tx depth 128 (perftest's default) outstanding,
			// 1000 iterations.
			const n, sz = 1000, 64
			port := 18530 + i
			// -F: a loaded emulated guest's cycle counter fails perftest's
			// CPU-frequency check ("Can't produce a report").
			args := fmt.Sprintf("-F -x %d -s %d -n %d -p %d", idx, sz, n, port)
			native, vr := tc.tool+" -d rxe0 "+args, env+tc.tool+" -d vrdma0 "+args
			server, clnt := native, vr+" "+GuestIP("A").String()
			if tc.vrdmaS {
				server, clnt = vr, native+" "+GuestIP("A").String()
			}
			before := sent()
			srv := g.Spawn(t, "A", 300, server)
			listening(t, port, srv)
			cout, crc := g.Run(t, "A", 300, clnt)
			sout, src := g.Wait(t, "A", srv, 300)
			t.Logf("server (exit %d): %s\n%s\nclient (exit %d): %s\n%s", src, server, sout, crc, clnt, cout)
			for _, o := range []struct {
				out string
				rc  int
			}{{sout, src}, {cout, crc}} {
				if o.rc != 0 || !strings.Contains(o.out, fmt.Sprintf(" %d ", sz)) {
					t.Errorf("%s: a side failed or printed no report line for %d bytes (exit %d)", tc.tool, sz, o.rc)
				}
			}
			if d := sent() - before; d < n {
				t.Errorf("rxe0 sent %d packets, want at least %d: the messages did not go through the device", d, n)
			}
		})
	}
}
