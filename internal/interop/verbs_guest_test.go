package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vrdma/vrdma/internal/guest"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/internal/verbs"
	"github.com/vrdma/vrdma/internal/verbs/verbsbuild"
)

// guestSock is the daemon's socket in a guest.
const guestSock = "/tmp/vrdma.sock"

// verbsKit is what a vrdma daemon with verbs links needs in a guest, which
// has rdma-core and the kernel's rdma_rxe but no compiler: the static
// vrdma binary, the verbs helper built here against the same Debian
// rdma-core, and (for programs run under vrdma) the guest library.
type verbsKit struct {
	root   string // the module's root
	bin    string // the static vrdma
	helper string // the verbs helper
	lib    string // the guest library's directory, "" if not built
}

// kits are the kits this test binary built: each is built once (the
// helper, the guest library and the static binary take tens of seconds,
// and every verbs guest test needs them). TestMain gives them a directory
// and removes it when the tests end.
var kits struct {
	mu   sync.Mutex
	dir  string
	done map[bool]kitResult // by withLib
}

type kitResult struct {
	k          verbsKit
	skip, fail string
}

// buildVerbsKit builds the kit (withLib: the guest library too), or
// returns the one built before, skipping the test where the helper or
// library cannot be built.
func buildVerbsKit(t *testing.T, withLib bool) verbsKit {
	t.Helper()
	Require(t)
	kits.mu.Lock()
	defer kits.mu.Unlock()
	r, ok := kits.done[withLib]
	if !ok {
		r = makeVerbsKit(t, withLib)
		if kits.done == nil {
			kits.done = map[bool]kitResult{}
		}
		kits.done[withLib] = r
	}
	switch {
	case r.skip != "":
		t.Skip(r.skip)
	case r.fail != "":
		t.Fatal(r.fail)
	}
	return r.k
}

// makeVerbsKit builds a kit in the kits' directory (a test's own when
// TestMain gave none).
func makeVerbsKit(t *testing.T, withLib bool) kitResult {
	dir := kits.dir
	if dir == "" {
		dir = t.TempDir()
	}
	dir, err := os.MkdirTemp(dir, "kit-")
	if err != nil {
		return kitResult{fail: err.Error()}
	}
	cache := filepath.Join(dir, "cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		return kitResult{fail: err.Error()}
	}
	t.Setenv(guest.CacheEnv, cache)
	var k verbsKit
	if k.helper, err = verbsbuild.Build(); err != nil {
		return kitResult{skip: fmt.Sprintf("cannot build the verbs helper here: %v", err)}
	}
	if withLib {
		k.lib = filepath.Join(dir, "lib")
		if err := os.Mkdir(k.lib, 0o700); err != nil {
			return kitResult{fail: err.Error()}
		}
		if k.lib, err = guest.Build(k.lib); err != nil {
			return kitResult{skip: fmt.Sprintf("cannot build the guest library here: %v", err)}
		}
	}
	if k.root, err = netns.ModuleRoot(); err != nil {
		return kitResult{fail: err.Error()}
	}
	k.bin = filepath.Join(dir, "vrdma")
	build := exec.Command("go", "build", "-o", k.bin, "./cmd/vrdma")
	build.Dir = k.root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return kitResult{fail: fmt.Sprintf("go build ./cmd/vrdma: %v\n%s", err, out)}
	}
	return kitResult{k: k}
}

// share is guest name's directory on this side: /mnt/host inside it.
func (g *Guests) share(name string) string { return filepath.Join(g.build, "run", name) }

// install copies the kit into guest name's share: /mnt/host/vrdma, the
// helper beside it, and the guest library in /mnt/host/vrdma-lib.
func (k verbsKit) install(t *testing.T, g *Guests, name string) {
	t.Helper()
	share := g.share(name)
	for from, to := range map[string]string{k.bin: "vrdma", k.helper: verbs.HelperName} {
		if err := copyExecutable(from, filepath.Join(share, to)); err != nil {
			t.Fatal(err)
		}
	}
	if k.lib == "" {
		return
	}
	if err := os.MkdirAll(filepath.Join(share, "vrdma-lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(k.lib)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".so") {
			if err := copyExecutable(filepath.Join(k.lib, e.Name()), filepath.Join(share, "vrdma-lib", e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// startGuestDaemon starts the static daemon in guest name on guestSock
// with the kit's helper and args, hanging up after secs, and waits until
// it serves. The busybox guest has no machine id, which the daemon's host
// identity needs: each guest gets its own. The caller defers the stop it
// returns, which logs the log's tail and stops the daemon (a deferred
// call, not a cleanup: the guests' commands take the test's context, which
// ends before cleanups run).
func startGuestDaemon(t *testing.T, g *Guests, name string, secs int, args string) (stop func()) {
	t.Helper()
	g.Exec(t, name, 30, fmt.Sprintf("[ -s /etc/machine-id ] || echo 5e1f0a1b2c3d4e5f60718293a4b5c6%02x >/etc/machine-id", name[0]))
	daemon := g.Spawn(t, name, secs, "/mnt/host/vrdma daemon --socket "+guestSock+" --state-dir /tmp/vrdma-state --verbs-helper /mnt/host/"+verbs.HelperName+" -v "+args+" >/tmp/vrdma-daemon.log 2>&1")
	if out, rc := g.Run(t, name, 120, "i=0; while [ ! -S "+guestSock+" ]; do pidof vrdma >/dev/null || exit 2; i=$((i+1)); [ $i -gt 500 ] && exit 1; sleep 0.2; done"); rc != 0 {
		log, _ := g.Run(t, name, 20, "cat /tmp/vrdma-daemon.log")
		t.Fatalf("the daemon in guest %s did not make its socket (%d): %s\n%s", name, rc, out, log)
	}
	return func() {
		log, _ := g.Run(t, name, 20, "tail -n 60 /tmp/vrdma-daemon.log")
		t.Logf("the daemon's log in guest %s:\n%s", name, log)
		g.Run(t, name, 20, "kill $(pidof vrdma) 2>/dev/null")
		g.Wait(t, name, daemon, 30)
	}
}

// awaitListen waits, at most two minutes, until a process in guest name
// listens on TCP port (a tool's out-of-band exchange), returning what the
// wait printed and its exit status (non-zero: it never did).
func (g *Guests) awaitListen(t *testing.T, name string, port int) (string, int) {
	t.Helper()
	return g.Run(t, name, 120, fmt.Sprintf("i=0; until grep -q ':%04X 00000000:0000 0A' /proc/net/tcp; do i=$((i+1)); [ $i -gt 600 ] && exit 1; sleep 0.1; done", port))
}
