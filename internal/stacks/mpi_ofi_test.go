package stacks

import (
	"fmt"
	"testing"
)

// The OFI MPI tests run testdata/mpicheck.c under Open MPI with
// libfabric's verbs provider in place of UCX: point-to-point through the
// cm PML and the ofi MTL on verbs;ofi_rxm (RC QPs connected through
// rdma_cm, each rank listening and dialling the others at once), one-sided
// through the pt2pt OSC over those messages, and no shared memory, so that
// ranks of one host talk through vrdma0 too. Between hosts (addMPIBetween)
// the ranks publish their interfaces' addresses, which needs a bind to
// "localhost" to leave the id without a device, as the kernel's rdma_cm
// does. (Open MPI's ofi BTL refuses every ofi_rxm provider by name; see
// docs/guest-library.md.)

// mpiOFIProvider is the libfabric provider the ofi MTL uses.
const mpiOFIProvider = "verbs;ofi_rxm"

// mpirunOFIArgs are mpirun's options for np ranks over libfabric's verbs
// provider.
func mpirunOFIArgs(np int) []string {
	return []string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", fmt.Sprint(np),
		"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", mpiOFIProvider,
		"--mca", "osc", "pt2pt", "--mca", "btl", "self", "-x", "FI_LOG_LEVEL=warn"}
}

// mpiOFI is Open MPI over libfabric's verbs provider.
var mpiOFI = mpiStack(mpirunOFIArgs)

func init() { addMPIBetween("mpirun -np 4 mtl ofi", mpiOFI) }

// TestMPIOFISameHost runs mpicheck on 2 ranks of one host over
// libfabric's verbs provider, in both modes. It hung in the first barrier
// while a connection request's addresses were the adapter's GID rather
// than the loopback address the listener was bound to: ofi_rxm did not
// find the requester in its address vector, took the two ranks' crossing
// requests for strangers' and its directed receives never matched.
func TestMPIOFISameHost(t *testing.T) { runMPISameHost(t, mpiOFI) }
