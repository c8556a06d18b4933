package stacks

import (
	"fmt"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/netns"
)

// The OFI MPI tests run testdata/mpicheck.c under Open MPI with
// libfabric's verbs provider in place of UCX: point-to-point through the
// cm PML and the ofi MTL on verbs;ofi_rxm (RC QPs connected through
// rdma_cm, each rank listening and dialling the others at once), one-sided
// through the pt2pt OSC over those messages, and no shared memory, so that
// ranks of one host talk through vrdma0 too. (Open MPI's ofi BTL does not
// take verbs;ofi_rxm; see docs/guest-library.md.)

// mpiOFIProvider is the libfabric provider the ofi MTL uses.
const mpiOFIProvider = "verbs;ofi_rxm"

// mpirunOFIArgs are mpirun's options for np ranks over libfabric's verbs
// provider.
func mpirunOFIArgs(np int) []string {
	return []string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", fmt.Sprint(np),
		"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", mpiOFIProvider,
		"--mca", "osc", "pt2pt", "--mca", "btl", "self", "-x", "FI_LOG_LEVEL=warn"}
}

// mpiOFICommand is mpiCommand for the ofi MTL.
func mpiOFICommand(t *testing.T, mode mpiMode, np int, extra ...string) (string, []string) {
	t.Helper()
	prog := mpiCheck(t)
	vrdma := netns.VRDMABinary(t)
	args := append(mpirunOFIArgs(np), extra...)
	if mode.aroundRun {
		return vrdma, append(append([]string{"run", "--", "mpirun"}, args...), prog)
	}
	return "mpirun", append(args, vrdma, "run", "--", prog)
}

// TestMPIOFISameHost runs mpicheck on 2 ranks of one host over
// libfabric's verbs provider, in both modes. It hung in the first barrier
// while a connection request's addresses were the adapter's GID rather
// than the loopback address the listener was bound to: ofi_rxm did not
// find the requester in its address vector, took the two ranks' crossing
// requests for strangers' and its directed receives never matched.
func TestMPIOFISameHost(t *testing.T) {
	mpiCheck(t)
	lib := guesttest.Library(t)
	h := sameHost(t, lib)
	modes := mpiModes
	if !fullMatrix {
		modes = modes[:1]
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			before := h.paths(t)
			name, args := mpiOFICommand(t, mode, 2)
			out, ok := h.run(t, mpiEnv(t), name, args...)
			if !ok {
				return
			}
			checkMPI(t, out, 2)
			tookPath(t, h, before, "memcpy")
		})
	}
}
