package guest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vrdma/vrdma/internal/daemontest"
)

// TestRegMRCallsNoMemoryHooks runs csrc/tests/memhooks_peer.c with
// csrc/tests/memhooks.c preloaded, which counts the calls to mmap, munmap,
// mremap, madvise, mprotect, mlock and munlock that reach libc through the
// dynamic linker, as UCX's, Open MPI's and libfabric's memory hooks see
// them: ibv_reg_mr and ibv_dereg_mr must make none (the library moves
// pages with direct system calls), or the hooks take a registration for
// the application unmapping memory.
func TestRegMRCallsNoMemoryHooks(t *testing.T) {
	cc := requireToolchain(t)
	hooks := filepath.Join(t.TempDir(), "memhooks.so")
	args := append(append([]string(nil), libFlags...), "-shared", "-o", hooks, filepath.Join("csrc", "tests", "memhooks.c"), "-ldl")
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building the hooks: %v\n%s", err, out)
	}
	bin := buildCTest(t, cc, append(append([]string(nil), libFlags...), sanitizeFlags...), "memhooks_peer.c")
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	// The sanitizers' runtime must come first among the libraries; the
	// preloaded hooks come before it, which it accepts when told.
	cmd.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0", "UBSAN_OPTIONS=print_stacktrace=1",
		"LD_PRELOAD="+hooks, "VRDMA_SOCKET="+daemontest.Start(t), "VRDMA_INSTANCE=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("memhooks_peer: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
