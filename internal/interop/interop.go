package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/netns"
)

// Subnet is the guests' IPv4 subnet: guest A is .1, B .2, ..., and the
// host side (br0 in the namespace) .254.
const Subnet = "10.47.91"

// HostIP is the host side's address on the guests' segment: br0's.
var HostIP = netip.MustParseAddr(Subnet + ".254")

// HostIface is the host side's interface in the namespace.
const HostIface = "br0"

// GuestIP returns the address of guest name ("A" is 10.47.91.1, "B" .2, ...).
func GuestIP(name string) netip.Addr {
	if len(name) != 1 || name[0] < 'A' || name[0] > 'Z' {
		return netip.Addr{}
	}
	return netip.MustParseAddr(fmt.Sprintf("%s.%d", Subnet, name[0]-'A'+1))
}

// Dir returns the shared interop folder: $VRDMA_INTEROP_DIR, or
// shared/interop in the module root's parent directory.
func Dir() (string, error) {
	if d := os.Getenv("VRDMA_INTEROP_DIR"); d != "" {
		return filepath.Abs(d)
	}
	root, err := netns.ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(root), "shared", "interop"), nil
}

// CacheDir returns where setup.sh builds the guest once for every run:
// $VRDMA_INTEROP_CACHE, or /var/tmp/vrdma-interop (kept across reboots and
// CI steps, outside the work tree).
func CacheDir() string {
	if d := os.Getenv("VRDMA_INTEROP_CACHE"); d != "" {
		return d
	}
	return "/var/tmp/vrdma-interop"
}

// Require skips the test unless it runs as root on a machine that can boot
// the guests: the shared interop folder, qemu-system-x86_64, /dev/net/tun
// and iproute2 must be there.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("interop: needs root to boot QEMU guests in a network namespace (CI runs these tests as root; run `sudo go test ...` by hand)")
	}
	dir, err := Dir()
	if err != nil {
		t.Skipf("interop: cannot find the shared interop folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "guest.sh")); err != nil {
		t.Skipf("interop: no shared interop scripts in %s (the project's shared/ folder beside the module root, or $VRDMA_INTEROP_DIR): %v", dir, err)
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("interop: needs qemu-system-x86_64: run .ci/deps.sh, or apt-get install qemu-system-x86 (shared/interop/setup.sh installs it with the rest)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("interop: QEMU's tap networking needs /dev/net/tun: %v", err)
	}
	netns.Require(t)
}

// Guests are QEMU guests running rdma_rxe, booted by Up, and the network
// namespace they share with the host side.
type Guests struct {
	// BootTime is how long `guest.sh up` took: namespace, QEMU start, and
	// the guests' boot up to rxe0 being active and the command agent
	// polling.
	BootTime time.Duration

	dir   string   // the shared interop folder
	build string   // this run's INTEROP_BUILD: links to the cached guest, and run/
	ns    string   // this run's INTEROP_NETNS
	names []string // the guests booted
	env   []string // guest.sh's environment
	host  *netns.Host
}

// Up boots the named guests ("A" if none; each gets GuestIP(name)) in a new
// namespace, building the guest into CacheDir first if needed, and stops
// them and deletes the namespace when the test ends.
func Up(t testing.TB, names ...string) *Guests {
	t.Helper()
	Require(t)
	if len(names) == 0 {
		names = []string{"A"}
	}
	g, err := newGuests(t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			g.logConsoles(t)
		}
		if err := g.down(); err != nil {
			t.Error(err)
		}
	})
	g.boot(t, names...)
	return g
}

// newGuests makes a run directory and a namespace name for guests to be
// booted into (boot), building the guest into CacheDir first if needed.
// Guests power themselves off after interop.maxlife seconds even if this
// process dies without calling down: the time left before go test's
// -timeout, plus a minute.
func newGuests(t testing.TB) (*Guests, error) {
	t.Helper()
	dir, _ := Dir()
	cache := ensureBuild(t, dir)

	var id [3]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	build, err := os.MkdirTemp("", "vrdma-interop-")
	if err != nil {
		return nil, err
	}
	g := &Guests{dir: dir, build: build, ns: "vrdma-rxe-" + hex.EncodeToString(id[:])}
	for _, f := range []string{"vmlinux", "initramfs.cpio"} {
		if err := os.Symlink(filepath.Join(cache, f), filepath.Join(build, f)); err != nil {
			os.RemoveAll(build)
			return nil, err
		}
	}
	maxlife := 1800
	if dl, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dl.Deadline(); ok {
			maxlife = int(time.Until(d).Seconds()) + 60
		}
	}
	g.env = append(os.Environ(),
		"INTEROP_BUILD="+build,
		"INTEROP_NETNS="+g.ns,
		"INTEROP_SUBNET="+Subnet,
		fmt.Sprintf("INTEROP_APPEND=%s interop.maxlife=%d", os.Getenv("INTEROP_APPEND"), maxlife),
	)
	return g, nil
}

// boot boots the named guests into g's namespace, making the namespace
// on the first call; the test fails if they do not come up. BootTime is
// this call's.
func (g *Guests) boot(t testing.TB, names ...string) {
	t.Helper()
	args := []string{"up"}
	for _, n := range names {
		ip := GuestIP(n)
		if !ip.IsValid() {
			t.Fatalf("interop.Up: guest name %q: want one capital letter", n)
		}
		args = append(args, n, ip.String()+"/24")
	}
	g.names = append(g.names, names...)
	start := time.Now()
	out, err := g.script(t.Context(), args...)
	g.BootTime = time.Since(start)
	if err != nil {
		t.Fatalf("interop: guest.sh up: %v\n%s", err, out)
	}
	t.Logf("guests %v up in %.2f s (namespace %s):\n%s", names, g.BootTime.Seconds(), g.ns, strings.TrimSpace(out))
}

// logConsoles logs the last lines of every guest's console: what a failed
// test shows of the guests.
func (g *Guests) logConsoles(t testing.TB) {
	t.Helper()
	for _, n := range g.names {
		t.Logf("console of guest %s (last lines):\n%s", n, lastLines(g.Console(n), 40))
	}
}

// down stops every guest, deletes the namespace and removes the run
// directory.
func (g *Guests) down() error {
	var errs []error
	if out, err := g.script(context.Background(), "down"); err != nil {
		errs = append(errs, fmt.Errorf("interop: guest.sh down: %v\n%s", err, out))
	}
	if err := os.RemoveAll(g.build); err != nil {
		errs = append(errs, fmt.Errorf("interop: %v", err))
	}
	return errors.Join(errs...)
}

// NS returns the name of the namespace the guests' bridge is in, where the
// host side's processes run.
func (g *Guests) NS() string { return g.ns }

// Host returns the host side as a netns.Host (namespace NS, interface br0),
// to run commands, Go code or a vrdma daemon there.
func (g *Guests) Host(t testing.TB) *netns.Host {
	t.Helper()
	if g.host == nil {
		g.host = netns.Existing(t, g.ns, HostIface)
	}
	return g.host
}

// Exec runs the shell command line cmd in guest name, killed after secs
// seconds, and returns its output (stdout and stderr); the test fails if it
// exits non-zero.
func (g *Guests) Exec(t testing.TB, name string, secs int, cmd string) string {
	t.Helper()
	out, rc := g.Run(t, name, secs, cmd)
	if rc != 0 {
		t.Fatalf("interop: in guest %s, %q exited %d:\n%s", name, cmd, rc, out)
	}
	return out
}

// Run is Exec returning the exit code instead of failing the test; 124
// means the command was still running after secs seconds.
func (g *Guests) Run(t testing.TB, name string, secs int, cmd string) (string, int) {
	t.Helper()
	return g.rc(t, "exec", name, fmt.Sprint(secs), cmd)
}

// Spawn starts the shell command line cmd in guest name in the background,
// killed after secs seconds, and returns its id for Wait once the guest has
// started it.
func (g *Guests) Spawn(t testing.TB, name string, secs int, cmd string) string {
	t.Helper()
	out, err := g.script(t.Context(), "spawn", name, fmt.Sprint(secs), cmd)
	if err != nil {
		t.Fatalf("interop: guest.sh spawn %s: %v\n%s", name, err, out)
	}
	id := strings.TrimSpace(out)
	if id == "" || strings.ContainsAny(id, " /\n") {
		t.Fatalf("interop: guest.sh spawn %s printed %q, not an id", name, out)
	}
	return id
}

// Wait waits up to secs seconds for the spawned command id in guest name to
// end, and returns its output and exit code (124 if it is still running).
func (g *Guests) Wait(t testing.TB, name, id string, secs int) (string, int) {
	t.Helper()
	return g.rc(t, "wait", name, id, fmt.Sprint(secs))
}

// Done reports whether the spawned command id in guest name has ended.
func (g *Guests) Done(name, id string) bool {
	_, err := os.Stat(filepath.Join(g.build, "run", name, "cmd", id+".rc"))
	return err == nil
}

// Console returns what guest name wrote on its serial console so far.
func (g *Guests) Console(name string) string {
	b, _ := os.ReadFile(filepath.Join(g.build, "run", name, "console.log"))
	return string(b)
}

// rc runs guest.sh ARGS and returns its output and exit code; the test
// fails if guest.sh could not run at all.
func (g *Guests) rc(t testing.TB, args ...string) (string, int) {
	t.Helper()
	out, err := g.script(t.Context(), args...)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &ee) && ee.Exited():
		return out, ee.ExitCode()
	default:
		t.Fatalf("interop: guest.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		return "", -1
	}
}

func (g *Guests) script(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(g.dir, "guest.sh"), args...)
	cmd.Env = g.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// ensureBuild makes sure the cache holds a guest built from the current
// scripts, running setup.sh under a lock if not, and returns the cache.
func ensureBuild(t testing.TB, dir string) string {
	t.Helper()
	cache := CacheDir()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatalf("interop: cache directory: %v", err)
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	stale := buildStale(dir, cache)
	if stale == "" {
		return cache
	}
	t.Logf("interop: building the guest into %s (%s): setup.sh, once", cache, stale)
	cmd := exec.CommandContext(t.Context(), filepath.Join(dir, "setup.sh"))
	cmd.Env = append(os.Environ(), "INTEROP_BUILD="+cache)
	if packagesInstalled(filepath.Join(dir, "setup.sh")) {
		cmd.Env = append(cmd.Env, "SKIP_APT=1")
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("interop: %s with INTEROP_BUILD=%s: %v\n%s", cmd.Path, cache, err, lastLines(string(out), 60))
	}
	t.Logf("interop: setup.sh took %.1f s", time.Since(start).Seconds())
	return cache
}

// buildStale says why the cache needs setup.sh ("" if it does not): an
// artefact is missing, or setup.sh or the guest's init is newer than the
// last run of setup.sh. That run is the newest artefact's time: setup.sh
// rebuilds the initramfs every time but keeps a kernel it extracted
// before, so the kernel may well be older than setup.sh.
func buildStale(dir, cache string) string {
	var built time.Time
	for _, f := range []string{"vmlinux", "initramfs.cpio"} {
		st, err := os.Stat(filepath.Join(cache, f))
		if err != nil || st.Size() == 0 {
			return "no " + f + " yet"
		}
		if st.ModTime().After(built) {
			built = st.ModTime()
		}
	}
	for _, src := range []string{"setup.sh", "guest/init"} {
		if st, err := os.Stat(filepath.Join(dir, src)); err == nil && st.ModTime().After(built) {
			return src + " changed since the last build"
		}
	}
	return ""
}

var hostPkgsRe = regexp.MustCompile(`(?s)HOST_PKGS="([^"]*)"`)

// packagesInstalled reports whether every Debian package setup.sh would
// install (its HOST_PKGS) is installed already, so that it may skip apt.
func packagesInstalled(setup string) bool {
	src, err := os.ReadFile(setup)
	if err != nil {
		return false
	}
	m := hostPkgsRe.FindSubmatch(src)
	if m == nil {
		return false
	}
	for _, p := range strings.Fields(string(m[1])) {
		out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", p).Output()
		if err != nil || !strings.Contains(string(out), "install ok installed") {
			return false
		}
	}
	return true
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// GID is one entry of a device's GID table, as `ibv_devinfo -v` and
// `vrdma devinfo -v` print it.
type GID struct {
	Index int
	Addr  netip.Addr // an IPv4-mapped GID is an Is4In6 address
	Type  string     // "RoCE v2", ...
}

var gidLineRe = regexp.MustCompile(`GID\[\s*(\d+)\]:\s*([0-9A-Fa-f:.]+)(?:,\s*(\S.*?))?\s*$`)

// GIDs parses the GID table out of `ibv_devinfo -v` output (rdma-core's
// "GID[  1]:  ::ffff:10.47.91.1, RoCE v2" or vrdma's fully written-out
// form). Lines that do not parse are left out.
func GIDs(devinfo string) []GID {
	var gids []GID
	for _, line := range strings.Split(devinfo, "\n") {
		m := gidLineRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var idx int
		if _, err := fmt.Sscan(m[1], &idx); err != nil {
			continue
		}
		a, err := netip.ParseAddr(m[2])
		if err != nil {
			continue
		}
		gids = append(gids, GID{Index: idx, Addr: a, Type: m[3]})
	}
	return gids
}

// GIDIndex returns the index of addr in a GID table, or -1.
func GIDIndex(gids []GID, addr netip.Addr) int {
	for _, g := range gids {
		if g.Addr == addr {
			return g.Index
		}
	}
	return -1
}
