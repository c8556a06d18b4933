package interop

import (
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/verbs"
)

// TestVerbsUplinkDiscovery runs the daemon (the static binary) inside guest
// A, which has rdma-core and the kernel's rdma_rxe but no compiler, with
// the helper built here against the same Debian rdma-core and passed
// through the share: `vrdma link add hca0 type verbs dev rxe0` must report
// what `ibv_devinfo -v -d rxe0` reports there: link layer Ethernet, an
// active port and the same GIDs with the same types.
func TestVerbsUplinkDiscovery(t *testing.T) {
	k := buildVerbsKit(t, false)
	root := k.root
	g := sharedGuests(t, "A")
	k.install(t, g, "A")
	share := g.share("A")
	devinfo := g.Exec(t, "A", 60, "ibv_devinfo -v -d rxe0")
	want := GIDs(devinfo)
	if len(want) == 0 || !strings.Contains(devinfo, "link_layer:\t\tEthernet") {
		t.Fatalf("ibv_devinfo -v -d rxe0 in the guest shows no GIDs or no Ethernet link layer:\n%s", devinfo)
	}

	defer startGuestDaemon(t, g, "A", 600, "")()
	const sock = guestSock
	cli := "/mnt/host/vrdma link --socket " + sock + " "
	added := g.Exec(t, "A", 120, cli+"add hca0 type verbs dev rxe0")
	shown := g.Exec(t, "A", 120, cli+"show hca0")
	t.Logf("ibv_devinfo -v -d rxe0:\n%s\nvrdma link show hca0:\n%s", devinfo, shown)
	for what, out := range map[string]string{"link add": added, "link show": shown} {
		for _, re := range []string{
			`(?m)^link hca0/1 state ACTIVE physical_state LINK_UP dev rxe0 port 1$`,
			`(?m)^    type verbs transport InfiniBand link_layer Ethernet port_state PORT_ACTIVE `,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%s lacks %q:\n%s", what, re, out)
			}
		}
		for _, gid := range want {
			line := fmt.Sprintf("    gid %d %s %s", gid.Index, netip.AddrFrom16(gid.Addr.As16()), gid.Type)
			if !strings.Contains(out, line) {
				t.Errorf("%s lacks %q (ibv_devinfo: GID[%d] %s, %s):\n%s", what, line, gid.Index, gid.Addr, gid.Type, out)
			}
		}
		if n := strings.Count(out, "    gid "); n != len(want) {
			t.Errorf("%s shows %d GIDs, ibv_devinfo %d:\n%s", what, n, len(want), out)
		}
	}
	// A device rdma-core lacks is a clear error, and the daemon goes on.
	out, rc := g.Run(t, "A", 60, cli+"add hca1 type verbs dev mlx5_0")
	if rc != 1 || !strings.Contains(out, "rdma-core has no device mlx5_0 (it has rxe0") {
		t.Errorf("link add dev mlx5_0 in the guest: exit %d:\n%s", rc, out)
	}
	if out := g.Exec(t, "A", 60, cli+"show"); !strings.Contains(out, "link hca0/1 state ACTIVE") {
		t.Errorf("after the failed add, link show:\n%s", out)
	}

	// The data path on the device: a memfd region registered with rxe0
	// through the helper, and two RC QPs in the helper moving bytes between
	// two such regions (package verbs' TestRegMROnDevice and
	// TestDataPathOnDevice, run in the guest).
	t.Run("reg_mr", func(t *testing.T) {
		testBin := filepath.Join(share, "verbs.test")
		build := exec.Command("go", "test", "-c", "-o", testBin, "./internal/verbs")
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go test -c ./internal/verbs: %v\n%s", err, out)
		}
		out := g.Exec(t, "A", 300, "VRDMA_VERBS_TEST_HELPER=/mnt/host/"+verbs.HelperName+" VRDMA_VERBS_TEST_DEV=rxe0 /mnt/host/verbs.test -test.run '^(TestRegMROnDevice|TestDataPathOnDevice|TestPushedCompletionsOnDevice|TestUDOnDevice|TestInlineOnDevice|TestSRQOnDevice)$' -test.v")
		t.Logf("in guest A:\n%s", out)
		for _, name := range []string{"TestRegMROnDevice", "TestDataPathOnDevice", "TestPushedCompletionsOnDevice", "TestUDOnDevice", "TestInlineOnDevice", "TestSRQOnDevice"} {
			if !strings.Contains(out, "--- PASS: "+name) {
				t.Errorf("%s did not pass in guest A:\n%s", name, out)
			}
		}
	})

	// The same device tests with the helper built under ASan and UBSan
	// (linked statically, as the guest has no sanitizer runtime): a memory
	// error in the helper's parsing or posting aborts it, and the test's
	// next call fails with ErrHelperGone.
	t.Run("sanitized", func(t *testing.T) {
		bin := filepath.Join(share, verbs.HelperName+"-asan")
		if err := buildSanitizedHelper(bin); err != nil {
			t.Fatal(err)
		}
		out := g.Exec(t, "A", 300, "VRDMA_VERBS_TEST_HELPER="+"/mnt/host/"+filepath.Base(bin)+" VRDMA_VERBS_TEST_DEV=rxe0 /mnt/host/verbs.test -test.run '^(TestRegMROnDevice|TestDataPathOnDevice|TestPushedCompletionsOnDevice|TestUDOnDevice|TestInlineOnDevice|TestSRQOnDevice)$' -test.v")
		t.Logf("in guest A, the sanitized helper:\n%s", out)
		for _, name := range []string{"TestRegMROnDevice", "TestDataPathOnDevice", "TestPushedCompletionsOnDevice", "TestUDOnDevice", "TestInlineOnDevice", "TestSRQOnDevice"} {
			if !strings.Contains(out, "--- PASS: "+name) {
				t.Errorf("%s did not pass with the sanitized helper in guest A:\n%s", name, out)
			}
		}
	})

	// rdma-core's own ibv_rc_pingpong against a QP driven through the
	// helper (package verbs' TestPingpongPeerOnDevice: rc_pingpong's TCP
	// exchange, then its SEND loop), both on rxe0, in both roles.
	t.Run("rc_pingpong", func(t *testing.T) {
		idx := GIDIndex(want, netip.AddrFrom16(GuestIP("A").As16()))
		if idx < 0 {
			t.Fatalf("rxe0 has no GID for %s: %v", GuestIP("A"), want)
		}
		const iters, size = 100, 4096
		native := fmt.Sprintf("ibv_rc_pingpong -d rxe0 -g %d -s %d -n %d", idx, size, iters)
		ours := fmt.Sprintf("VRDMA_VERBS_TEST_HELPER=/mnt/host/%s VRDMA_VERBS_TEST_DEV=rxe0 VRDMA_VERBS_TEST_PINGPONG_ITERS=%d VRDMA_VERBS_TEST_PINGPONG_SIZE=%d ",
			verbs.HelperName, iters, size)
		test := " /mnt/host/verbs.test -test.run '^TestPingpongPeerOnDevice$' -test.v"
		addr := fmt.Sprintf("%s:18515", GuestIP("A"))
		check := func(t *testing.T, out string, rc int, nout string, nrc int) {
			t.Logf("the helper's side (exit %d):\n%s\nibv_rc_pingpong (exit %d):\n%s", rc, out, nrc, nout)
			if rc != 0 || !strings.Contains(out, "--- PASS: TestPingpongPeerOnDevice") {
				t.Errorf("TestPingpongPeerOnDevice did not pass in guest A (exit %d)", rc)
			}
			if nrc != 0 || !strings.Contains(nout, fmt.Sprintf("%d iters in", iters)) {
				t.Errorf("ibv_rc_pingpong did not finish its %d iterations (exit %d)", iters, nrc)
			}
		}
		t.Run("native_server", func(t *testing.T) {
			srv := g.Spawn(t, "A", 240, native)
			out, rc := g.Run(t, "A", 240, ours+"VRDMA_VERBS_TEST_PINGPONG="+addr+test)
			nout, nrc := g.Wait(t, "A", srv, 240)
			check(t, out, rc, nout, nrc)
		})
		t.Run("native_client", func(t *testing.T) {
			srv := g.Spawn(t, "A", 240, ours+"VRDMA_VERBS_TEST_PINGPONG_LISTEN="+addr+test)
			// 18515 is 0x4853; wait until the test listens on it.
			if out, rc := g.Run(t, "A", 120, "i=0; until grep -q ':4853 00000000:0000 0A' /proc/net/tcp; do i=$((i+1)); [ $i -gt 600 ] && exit 1; sleep 0.1; done"); rc != 0 {
				sout, _ := g.Wait(t, "A", srv, 30)
				t.Fatalf("the helper's side never listened on %s (%d): %s\n%s", addr, rc, out, sout)
			}
			nout, nrc := g.Run(t, "A", 240, native+" "+GuestIP("A").String())
			out, rc := g.Wait(t, "A", srv, 240)
			check(t, out, rc, nout, nrc)
		})
	})
}

// copyExecutable copies from to to, mode 0755.
func copyExecutable(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// buildSanitizedHelper compiles the helper's embedded sources with ASan and
// UBSan (their runtimes linked in statically) into bin.
func buildSanitizedHelper(bin string) error {
	dir, err := os.MkdirTemp("", "vrdma-helper-asan-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := []string{"-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
		"-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all",
		"-static-libasan", "-static-libubsan", "-o", bin}
	err = fs.WalkDir(verbs.Sources(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(verbs.Sources(), p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".c") {
			args = append(args, filepath.Join(dir, p))
		}
		return os.WriteFile(filepath.Join(dir, p), b, 0o644)
	})
	if err != nil {
		return err
	}
	if out, err := exec.Command("cc", append(args, "-libverbs")...).CombinedOutput(); err != nil {
		return fmt.Errorf("building the sanitized helper: %v\n%s", err, out)
	}
	return nil
}
