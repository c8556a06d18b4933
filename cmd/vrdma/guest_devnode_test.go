package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest"
)

// TestGuestBuildOutInstallsWithoutTheDeviceNode: `guest build --out` by a
// root that cannot make device nodes (root in a user namespace: a rootless
// podman, buildah or kaniko image build, the Dockerfile of
// docs/guest-library.md) installs the library and says the node is missing,
// instead of failing the install over a node that only UCX needs and that a
// container gets at run time (`--device`).
func TestGuestBuildOutInstallsWithoutTheDeviceNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the scene is root in a user namespace, made from the host's root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	built, err := guest.Build(t.TempDir())
	if err != nil {
		t.Skipf("cannot build the guest library here: %v", err)
	}
	dest := filepath.Join(t.TempDir(), "lib", "vrdma")
	// Root mapped to root, with no CAP_MKNOD over the host's /dev, and an
	// empty /dev/infiniband of the namespace's own: the node is missing
	// and cannot be made.
	script := `mkdir -p /dev/infiniband && mount -t tmpfs -o mode=755 vrdma-test /dev/infiniband && exec "$@"`
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--mount", "--", "sh", "-c", script, "sh",
		os.Args[0], "guest", "build", "--out", dest)
	cmd.Env = append(os.Environ(), cliEnv+"=1", guestLibEnv+"="+built, "LC_ALL=C")
	var out, errs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errs
	err = cmd.Run()
	if strings.Contains(errs.String(), "unshare:") || strings.Contains(errs.String(), "mount:") {
		t.Skipf("no user namespace to run the scene in: %s", errs.String())
	}
	if err != nil || out.String() != dest+"\n" {
		t.Fatalf("guest build --out as root without CAP_MKNOD: %v, printed %q (stderr %q); want the library installed in %s", err, out.String(), errs.String(), dest)
	}
	if _, err := os.Stat(filepath.Join(dest, guest.SOName)); err != nil {
		t.Errorf("the library is not installed: %v", err)
	}
	if !strings.Contains(errs.String(), guest.DeviceNode) {
		t.Errorf("stderr %q does not say that %s is missing", errs.String(), guest.DeviceNode)
	}
}
