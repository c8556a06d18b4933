package guest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Open MPI's openib BTL (Debian's openmpi-bin, unmodified) on a vrdma
// adapter: it calls ibv_get_sysfs_path() as rdma-core declares it (const
// char *(void)), requires <that>/class/infiniband, and asks hwloc how far
// the device is. With vrdma's old int (char *, size_t) symbol it crashed in
// MPI_Init (docs/design/device-discovery.md).

func TestToolOpenMPIOpenibBTLFindsTheAdapter(t *testing.T) {
	requireTool(t, "mpirun", "openmpi-bin")
	requireTool(t, "mpicc", "libopenmpi-dev")
	h := newToolHost(t)
	bin := filepath.Join(t.TempDir(), "mpi_allreduce")
	if out, err := exec.Command("mpicc", "-o", bin, "testdata/mpi_allreduce.c").CombinedOutput(); err != nil {
		t.Fatalf("mpicc testdata/mpi_allreduce.c: %v\n%s", err, out)
	}
	// One rank: self carries its messages, and openib initialises on the
	// adapter all the same (its connection schemes are another matter:
	// Debian's build has only udcm, for InfiniBand ports).
	out := h.run(t, "", "mpirun", "--allow-run-as-root", "-np", "1",
		"--mca", "pml", "ob1", "--mca", "btl", "self,openib", "--mca", "btl_base_verbose", "30",
		"--mca", "btl_openib_warn_no_device_params_found", "0",
		"-x", "LD_LIBRARY_PATH", "-x", "VRDMA_SOCKET", "-x", "XDG_RUNTIME_DIR", "-x", "VRDMA_DEBUG", bin)
	if !strings.Contains(out, "ranks=1 sum=0") {
		t.Errorf("the MPI program did not finish; it printed:\n%s", out)
	}
	if !strings.Contains(out, "device=vrdma0") {
		t.Errorf("the openib BTL did not reach vrdma0 (it checks <ibv_get_sysfs_path()>/class/infiniband first); it printed:\n%s", out)
	}
}
