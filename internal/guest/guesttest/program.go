package guesttest

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest"
	"github.com/vrdma/vrdma/internal/netns"
)

// toolPackages maps the programs tests run to the Debian packages that
// ship them, for the skip message.
var toolPackages = map[string]string{
	"ibv_devinfo": "ibverbs-utils", "ibv_devices": "ibverbs-utils",
	"ibv_rc_pingpong": "ibverbs-utils", "ibv_uc_pingpong": "ibverbs-utils",
	"ibv_ud_pingpong": "ibverbs-utils", "ibv_srq_pingpong": "ibverbs-utils",
	"qperf": "qperf",
	"rping": "rdmacm-utils", "ucmatose": "rdmacm-utils", "udaddy": "rdmacm-utils",
	"rdma_server": "rdmacm-utils", "rdma_client": "rdmacm-utils",
	"rdma_xserver": "rdmacm-utils", "rdma_xclient": "rdmacm-utils",
	"rstream": "rdmacm-utils", "riostream": "rdmacm-utils",
}

// packageOf returns the Debian package that ships program name.
func packageOf(name string) string {
	if p, ok := toolPackages[name]; ok {
		return p
	}
	if strings.HasPrefix(name, "ib_") {
		return "perftest"
	}
	return name
}

// Library builds the guest library with guest.Build, once per test binary
// (libraryCache), and returns the directory holding libibverbs.so.1. It
// skips the test, naming the Debian packages to install, when the compiler
// or rdma-core's headers are missing, and fails it when the build fails.
func Library(t testing.TB) string {
	t.Helper()
	dir, err := buildLibrary()
	var missing *guest.MissingToolsError
	switch {
	case errors.As(err, &missing):
		t.Skipf("guesttest: %v", err)
	case err != nil:
		t.Fatalf("guesttest: %v", err)
	}
	return dir
}

// RequirePrograms skips the test unless every named program is on the
// PATH, saying which Debian packages to install.
func RequirePrograms(t testing.TB, names ...string) {
	t.Helper()
	var missing, pkgs []string
	seen := map[string]bool{}
	for _, n := range names {
		if _, err := exec.LookPath(n); err == nil {
			continue
		}
		missing = append(missing, n)
		if p := packageOf(n); !seen[p] {
			seen[p] = true
			pkgs = append(pkgs, p)
		}
	}
	if len(missing) > 0 {
		t.Skipf("guesttest: %s not installed: apt-get install %s", strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
}

// Program says where and how a verbs program runs: in Host's namespace,
// loading the guest library from Lib and attaching to the daemon at Socket
// (and to Instance, when not "").
type Program struct {
	Host     *netns.Host
	Lib      string // the directory holding libibverbs.so.1 (Library's result)
	Socket   string // the daemon's unix socket (VRDMA_SOCKET)
	Instance string // the instance (VRDMA_INSTANCE); "" for the default one
	// Env is more NAME=VALUE settings for the program (VRDMA_DEBUG=1, ...).
	Env []string
}

// Command returns `ip netns exec NS env LD_LIBRARY_PATH=LIB VRDMA_SOCKET=S
// ... name args...`: each of ip and env execs in place, so the process's
// PID is the program's. It is killed if ctx ends first.
func (p Program) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := []string{"LD_LIBRARY_PATH=" + p.Lib, "VRDMA_SOCKET=" + p.Socket}
	if p.Instance != "" {
		argv = append(argv, "VRDMA_INSTANCE="+p.Instance)
	}
	argv = append(argv, p.Env...)
	argv = append(append(argv, name), args...)
	return p.Host.Command(ctx, "env", argv...)
}
