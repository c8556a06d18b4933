package pyverbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/internal/proctest"
)

// passFloor is how many of the suite's tests pass today with seed
// suiteSeed: a run with fewer is a regression. Raise it when more pass.
//
// 2026-11-27, rdma-core 44.0-2 (Debian 12), main at 6ff9e25: 273 tests,
// 69 passed, 1 failed, 11 errors, 192 skipped (85.2 % of the 81 not
// skipped pass); docs/pyverbs.md sorts the rest by cause. Issue 19's
// target is 95 % of the tests not skipped, with skips only for hardware.
//
// Memory windows: 92 passed, 0 failed, 5 errors, 176 skipped (94.8 % of
// the 97 not skipped), the 8 memory-window tests among the passes.
// Since: 89 passed, 0 failed, 7 errors, 177 skipped (92.7 % of 96), with
// rdma_cm's ACK timeout option, ids' PDs and applications' own QPs (the
// three test_rdmacm async traffic tests) and CQs cleaned of a QP's
// completions when it enters RESET (test_mr_rereg_pd, test_mr_rereg_addr).
//
// Both together (main after the merges): 97 passed, 0 failed, 0 errors,
// 176 skipped: every test not skipped passes; the skips are hardware and
// the features docs/pyverbs.md lists as missing.
//
// On-demand paging and parent domains (branch i19-odp): 113 passed, 0
// failed, 0 errors, 160 skipped: 11 test_odp tests and 5
// test_parent_domain tests more.
// ATOMIC WRITE and device import (branch i19-atomicw, on that main): 99
// passed, 0 failed, 0 errors, 174 skipped (test_qp_ex_rc_atomic_write,
// test_shared_pd.test_imported_rc_ex_rdma_write).
// With multicast (i19-mcast branch): 100 passed, 0 failed, 0 errors, 173
// skipped: test_rdmacm's three multicast traffic tests run and pass.
// XRC (i19-xrc): 103 passed, 0 failed, 0 errors, 170 skipped: the six
// tests that skipped for "Create XRCD is not supported" pass (test_atomic
// 2, test_cqex, test_qpex 2, test_relaxed_ordering); the seventh,
// test_odp_xrc_traffic, now skips for ODP.
// Merged with main (ODP, parent domains, ATOMIC WRITE, import, multicast):
// 125 passed, 0 failed, 0 errors, 148 skipped.
// Completion timestamps and ibv_query_rt_values_ex (i19-pyv): 126 passed,
// 147 skipped: test_timestamp_real_time_rc_traffic passes; the
// free-running test and test_query_rt_values now skip for mlx5's own
// clock conversion (mlx5dv_ts_to_ns) instead. With implicit ODP: 129
// passed, 144 skipped (the three implicit test_odp tests); of the skips,
// 141 need hardware or another vendor's device and 3 the host's huge pages.
// Huge pages registered (i19-huge), the suite reserving a few: 132 passed,
// 141 skipped (test_odp's two huge-page tests, test_parent_domain's one).
const passFloor = 132

// hugePageTests is how many of the tests passFloor counts need free huge
// pages: where none can be had they skip, and the floor is lower by them.
const hugePageTests = 3

// suiteSeed seeds the suite's random draws (QP types, create masks and
// flags, sizes) so that a run is repeatable: with other seeds, 64 to 68
// tests passed on the same code, some QP tests skipping or not with
// the draws (create_flags, see docs/pyverbs.md). VRDMA_PYVERBS_SEED
// overrides it, to explore.
const suiteSeed = "1"

// suiteTimeout is the hang guard of the whole suite, which takes about
// a minute here (a stuck rdma_cm test waits 15 s for itself): reaching it means a test hangs (a lost completion), not that
// the suite is slow.
const suiteTimeout = 5 * time.Minute

// python is Debian's interpreter, for which python3-pyverbs installs its
// modules (a python3 earlier on the PATH, such as pyenv's, has no pyverbs).
const python = "/usr/bin/python3"

// defaultCache is where .ci/pyverbs-tests.sh puts the suite.
const defaultCache = "/var/tmp/vrdma-pyverbs"

// TestMain gives `vrdma run` and the guest library a private
// XDG_RUNTIME_DIR (the library's sysfs tree goes there), removed at the end.
func TestMain(m *testing.M) { os.Exit(proctest.RunInPrivateRuntimeDir(m)) }

// installedPyverbs returns python3-pyverbs's Debian version, or skips the
// test, saying what to install, when it or Debian's python3 is missing.
func installedPyverbs(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("dpkg-query", "-W", "-f=${Status} ${Version}", "python3-pyverbs").Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 4 || f[2] != "installed" {
		t.Skip("python3-pyverbs is not installed: apt-get install python3-pyverbs, then run .ci/pyverbs-tests.sh as root to fetch rdma-core's tests")
	}
	if err := exec.Command(python, "-c", "import pyverbs.device").Run(); err != nil {
		t.Skipf("%s cannot import pyverbs (%v): python3-pyverbs installs it for Debian's python3 only", python, err)
	}
	return f[3]
}

// suiteDir returns the directory of rdma-core's tests for python3-pyverbs
// version, or skips the test, saying how to fetch them.
func suiteDir(t *testing.T, version string) string {
	t.Helper()
	cache := os.Getenv("VRDMA_PYVERBS_CACHE")
	if cache == "" {
		cache = defaultCache
	}
	dir := filepath.Join(cache, version, "tests")
	if _, err := os.Stat(filepath.Join(dir, "run_tests.py")); err != nil {
		t.Skipf("rdma-core %s's tests are not in %s: run .ci/pyverbs-tests.sh as root to fetch them from Debian (they are not kept in the repository)", version, dir)
	}
	return dir
}

// TestPyverbsSuite runs rdma-core's pyverbs suite, unmodified, under
// `vrdma run` against a daemon of its own in a network-namespace host with
// a RoCEv2 link on its interface (as rxe0 on eth0 would be), logs every
// failure, error and skip with its reason, and fails if fewer tests pass
// than passFloor or if the suite does not run to its end.
//
// The suite's rdma_cm tests look for the device's network interface at the
// kernel's fixed path /sys/class/infiniband/DEV/device/net/IFACE, which no
// program can add to sysfs; without it they skip ("doesn't have net
// interface"). The suite runs in a mount namespace of its own where
// /sys/class holds only that directory (tmpfs), so that those 11 tests run
// against the drop-in librdmacm as they would on rdma_rxe.
func TestPyverbsSuite(t *testing.T) {
	version := installedPyverbs(t)
	tests := suiteDir(t, version)
	netns.Require(t)
	runner, err := filepath.Abs(filepath.Join("testdata", "runner.py"))
	if err != nil {
		t.Fatal(err)
	}
	seed := suiteSeed
	if s := os.Getenv("VRDMA_PYVERBS_SEED"); s != "" {
		seed = s
	}
	floor := passFloor
	if !reserveHugePages(t, suiteHugePages) {
		floor -= hugePageTests
	}
	h := netns.New(t, 1).Hosts[0]
	d := h.StartDaemon(t, "--no-switch")
	d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", h.Iface)
	work := t.TempDir()
	cache := filepath.Join(work, "guest-cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(work, "results.jsonl")

	ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
	defer cancel()
	netDir := `mount -t tmpfs vrdma-pyverbs /sys/class && mkdir -p "/sys/class/infiniband/vrdma0/device/net/$0" && exec "$@"`
	cmd := h.Command(ctx, "unshare", "--mount", "--propagation", "private", "sh", "-c", netDir, h.Iface,
		netns.VRDMABinary(t), "run", "--socket", d.Socket, "--", python, runner, tests, results, seed)
	cmd.Env = append(os.Environ(), "VRDMA_GUEST_CACHE="+cache, "LD_LIBRARY_PATH=",
		"PYTHONDONTWRITEBYTECODE=1", "LC_ALL=C")
	cmd.WaitDelay = 5 * time.Second
	var out proctest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()
	took := time.Since(start)

	f, err := os.Open(results)
	if err != nil {
		t.Fatalf("the suite wrote no results (%v; exit: %v); it printed:\n%s", err, runErr, out.String())
	}
	defer f.Close()
	run, err := ParseResults(f)
	switch {
	case errors.Is(err, ErrUnfinished):
		t.Errorf("%v: %d tests ended, then it stopped (exit: %v); the last: %v; it printed:\n%s",
			err, len(run.Results), runErr, lastTest(run), out.String())
	case err != nil:
		t.Fatalf("%v; the suite printed:\n%s", err, out.String())
	case runErr != nil:
		t.Errorf("the suite ran to its end but exited with %v; it printed:\n%s", runErr, out.String())
	case run.Ran != len(run.Results):
		t.Errorf("unittest ran %d tests, the runner recorded %d", run.Ran, len(run.Results))
	}

	c := run.Count()
	pct := 0.0
	if n := c.NotSkipped(); n > 0 {
		pct = 100 * float64(c[Pass]) / float64(n)
	}
	t.Logf("rdma-core %s's pyverbs suite, seed %s, in %v: %d tests: %s; %.1f %% of the %d not skipped pass (target 95 %%)",
		version, seed, took.Round(time.Second), len(run.Results), c, pct, c.NotSkipped())
	for _, g := range run.Groups() {
		t.Logf("%-5s %s (%d): %s: %s", g.Outcome, g.Class, len(g.Tests), g.Reason, strings.Join(g.Tests, " "))
	}
	switch {
	case c[Pass] < floor:
		t.Errorf("%d of rdma-core's pyverbs tests pass, fewer than the %d that passed before (passFloor, less the huge-page tests where there are no huge pages): a regression; the failures and errors are listed above", c[Pass], floor)
	case c[Pass] > floor:
		t.Logf("%d pass, more than passFloor (%d): raise it", c[Pass], floor)
	}
}

// lastTest names the last test that ended, or says none did.
func lastTest(run Run) string {
	if len(run.Results) == 0 {
		return "none"
	}
	r := run.Results[len(run.Results)-1]
	return fmt.Sprintf("%s (%s)", r.Test, r.Outcome)
}
