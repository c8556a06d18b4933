package interop

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/internal/verbs"
	"github.com/vrdma/vrdma/internal/verbs/verbsbuild"
)

// TestVerbsUplinkCM: rdma_cm through the device's own CM in guest A (the
// kernel's rdma_cm on rxe0, driven by the helper through the host's
// librdmacm). First package verbs' TestCMOnDevice, with the helper as it
// is built and built under ASan and UBSan: two device QPs connected
// through the device's CM (listen, connect, request, accept, RTU,
// disconnect, reject), SENDs both ways.
func TestVerbsUplinkCM(t *testing.T) {
	Require(t)
	t.Setenv(guest.CacheEnv, t.TempDir())
	helper, err := verbsbuild.Build()
	if err != nil {
		t.Skipf("cannot build the verbs helper here: %v", err)
	}
	root, err := netns.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	g := Up(t, "A")
	share := filepath.Join(g.build, "run", "A")
	if err := copyExecutable(helper, filepath.Join(share, verbs.HelperName)); err != nil {
		t.Fatal(err)
	}
	testBin := filepath.Join(share, "verbs-cm.test")
	build := exec.Command("go", "test", "-c", "-o", testBin, "./internal/verbs")
	build.Dir = root
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
}
