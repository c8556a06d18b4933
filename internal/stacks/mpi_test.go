package stacks

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/netns"
)

// The MPI tests run testdata/mpicheck.c, built with Debian's mpicc, under
// Open MPI's mpirun with UCX as its point-to-point layer (--mca pml ucx)
// and one-sided layer (--mca osc ucx), UCX's default thresholds (eager,
// rendezvous) and vrdma0 its only transport (UCX_TLS=rc_v,self): every
// rank checks the results of messages, collectives and puts and gets, and
// rank 0 prints the verdict. Both ways of putting vrdma under MPI run:
// `vrdma run -- mpirun ... ./mpicheck` and `mpirun ... vrdma run --
// ./mpicheck`.

var (
	mpiOnce sync.Once
	mpiDir  string // holds mpicheck, the launch agent's scripts, vrdma run's cache
	mpiErr  error
)

// mpiCheck builds testdata/mpicheck.c with mpicc, once per test binary,
// and returns the program's path.
func mpiCheck(t *testing.T) string {
	t.Helper()
	requirePrograms(t, "mpirun", "mpicc")
	mpiOnce.Do(func() {
		mpiDir, mpiErr = os.MkdirTemp("", "vrdma-stacks-mpi-")
		if mpiErr != nil {
			return
		}
		src, err := filepath.Abs(filepath.Join("testdata", "mpicheck.c"))
		if err != nil {
			mpiErr = err
			return
		}
		out, err := exec.Command("mpicc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", filepath.Join(mpiDir, "mpicheck"), src).CombinedOutput()
		if err != nil {
			mpiErr = fmt.Errorf("mpicc testdata/mpicheck.c: %v\n%s", err, out)
		}
	})
	if mpiErr != nil {
		t.Fatal(mpiErr)
	}
	return filepath.Join(mpiDir, "mpicheck")
}

// mpiUCXEnv is UCX's environment for the ranks: vrdma0 the only network
// device, rc_verbs the only transport between ranks (no shared memory,
// so that ranks on one host talk through vrdma too), thresholds as UCX
// chooses them.
var mpiUCXEnv = []string{"UCX_NET_DEVICES=vrdma0:1", "UCX_TLS=rc_v,self", "UCX_WARN_UNUSED_ENV_VARS=n"}

// mpirunArgs are mpirun's options for np ranks: UCX for point-to-point
// and one-sided, none of Open MPI's own verbs or libfabric transports,
// mpiUCXEnv exported to every rank.
func mpirunArgs(np int) []string {
	args := []string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", fmt.Sprint(np),
		"--mca", "pml", "ucx", "--mca", "osc", "ucx", "--mca", "btl", "self,vader", "--mca", "mtl", "^ofi,psm,psm2"}
	for _, kv := range mpiUCXEnv {
		args = append(args, "-x", kv)
	}
	return args
}

// vrdmaRunCache is the guest-library cache of `vrdma run` in the MPI tests:
// one per test binary, built on first use.
func vrdmaRunCache(t *testing.T) string {
	t.Helper()
	mpiCheck(t)
	dir := filepath.Join(mpiDir, "guest-cache")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mpiStack is the transport under Open MPI in a test: mpirun's options
// for np ranks over it.
type mpiStack func(np int) []string

// mpiUCX is Open MPI over UCX.
var mpiUCX = mpiStack(mpirunArgs)

// mpiMode is where `vrdma run` goes: around mpirun, or around each rank.
type mpiMode struct {
	name      string
	aroundRun bool // vrdma run -- mpirun ...; else mpirun ... vrdma run -- ./mpicheck
}

var mpiModes = []mpiMode{{"vrdma run -- mpirun", true}, {"mpirun -- vrdma run", false}}

// mpiCommand returns the program and arguments that run mpicheck on np
// ranks over stack in mode, with extra mpirun options.
func mpiCommand(t *testing.T, stack mpiStack, mode mpiMode, np int, extra ...string) (string, []string) {
	t.Helper()
	prog := mpiCheck(t)
	vrdma := netns.VRDMABinary(t)
	args := append(stack(np), extra...)
	if mode.aroundRun {
		return vrdma, append(append([]string{"run", "--", "mpirun"}, args...), prog)
	}
	return "mpirun", append(args, vrdma, "run", "--", prog)
}

// mpiEnv is the environment of mpirun on h: vrdma run's cache, and no
// guest library on the loader's path (vrdma run puts it there).
func mpiEnv(t *testing.T) []string {
	return []string{"VRDMA_GUEST_CACHE=" + vrdmaRunCache(t), "LD_LIBRARY_PATH="}
}

// checkMPI reads mpicheck's verdict out of mpirun's output.
func checkMPI(t *testing.T, out string, np int) {
	t.Helper()
	c, err := ParseMPICheck(out)
	if err != nil {
		t.Fatalf("%v\nmpirun printed:\n%s", err, out)
	}
	if !c.OK || c.Ranks != np {
		t.Errorf("mpicheck: %+v, want OK on %d ranks; mpirun printed:\n%s", c, np, out)
	}
}

// TestMPISameHost runs mpicheck on 2 ranks of one host in both modes:
// the ranks' messages go through vrdma0 (its memcpy path).
func TestMPISameHost(t *testing.T) { runMPISameHost(t, mpiUCX) }

// runMPISameHost runs mpicheck on 2 ranks of one host over stack, in
// both modes in the full matrix (the first in CI's subset), and checks
// that the messages took vrdma0's memcpy path.
func runMPISameHost(t *testing.T, stack mpiStack) {
	t.Helper()
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
			name, args := mpiCommand(t, stack, mode, 2)
			out, ok := h.run(t, mpiEnv(t), name, args...)
			if !ok {
				return
			}
			checkMPI(t, out, 2)
			tookPath(t, h, before, "memcpy")
		})
	}
}

func init() { addMPIBetween("mpirun -np 4", mpiUCX) }

// addMPIBetween adds a run of mpicheck over stack to TestStacksBetweenHosts,
// in both modes.
func addMPIBetween(name string, stack mpiStack) {
	betweenHosts = append(betweenHosts, struct {
		name string
		run  func(t *testing.T, a, b *host, mode linkMode)
	}{name, func(t *testing.T, a, b *host, mode linkMode) {
		mpiCheck(t)
		for _, m := range mpiModes {
			t.Run(m.name, func(t *testing.T) { runMPIBetween(t, a, b, stack, m, mode.path) })
		}
	}})
}

// runMPIBetween runs mpicheck on 4 ranks, 2 on each host (mpirun on a),
// over stack in mode; Open MPI starts its daemon on b through a launch
// agent that enters b's namespace (as ssh would reach another machine).
func runMPIBetween(t *testing.T, a, b *host, stack mpiStack, mode mpiMode, path string) {
	t.Helper()
	dir := t.TempDir()
	hostfile := filepath.Join(dir, "hosts")
	hosts := fmt.Sprintf("%s slots=2\n%s slots=2\n", a.ns.IPv4, b.ns.IPv4)
	if err := os.WriteFile(hostfile, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "agent")
	if err := os.WriteFile(agent, []byte(launchAgent(t, mode, a, b)), 0o755); err != nil {
		t.Fatal(err)
	}
	ba, bb := a.paths(t), b.paths(t)
	name, args := mpiCommand(t, stack, mode, 4, "--hostfile", hostfile, "--mca", "plm_rsh_agent", agent,
		"--mca", "oob_tcp_if_include", "eth0", "--mca", "plm_rsh_no_tree_spawn", "1")
	out, ok := a.run(t, mpiEnv(t), name, args...)
	if !ok {
		return
	}
	checkMPI(t, out, 4)
	tookPathAndMemcpy(t, a, ba, path)
	tookPathAndMemcpy(t, b, bb, path)
}

// launchAgent is the script Open MPI's rsh launcher runs as
// `AGENT HOST COMMAND...` to start its daemon on HOST: it runs COMMAND with
// sh in that host's namespace, against that host's daemon (under vrdma run
// when mpirun runs under it).
func launchAgent(t *testing.T, mode mpiMode, hosts ...*host) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Open MPI's launch agent for the test: AGENT HOST COMMAND...\nhost=$1; shift\ncase $host in\n")
	for _, h := range hosts {
		wrap := ""
		if mode.aroundRun {
			wrap = netns.VRDMABinary(t) + " run -- "
		}
		fmt.Fprintf(&b, "%s) exec ip netns exec %s env VRDMA_SOCKET=%s VRDMA_GUEST_CACHE=%s LD_LIBRARY_PATH= %ssh -c \"$*\" ;;\n",
			h.ns.IPv4, h.ns.NS, h.d.Socket, vrdmaRunCache(t), wrap)
	}
	b.WriteString("esac\necho \"agent: no host $host\" >&2\nexit 1\n")
	return b.String()
}
