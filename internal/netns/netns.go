package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nsDir is where `ip netns add` mounts the namespaces it names.
const nsDir = "/run/netns"

// readyTimeout bounds every wait for the kernel (an address leaving DAD, a
// daemon's socket): reaching it means something is broken, not slow.
const readyTimeout = 30 * time.Second

// Require skips the test unless it runs as root with iproute2's `ip` on the
// PATH, which every function of this package needs.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns: needs root to create network namespaces (CI runs these tests as root; run `sudo go test ...` by hand)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns: needs `ip` from iproute2: apt-get install iproute2")
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		t.Skipf("netns: the kernel has no network namespaces: %v", err)
	}
}

// Topology is a set of hosts made by New, joined on one Ethernet segment.
type Topology struct {
	// ID prefixes the names of every namespace of the topology
	// ("vrdma-1a2b3c": hosts "vrdma-1a2b3c-h1", ..., bridge "vrdma-1a2b3c-br").
	ID string
	// Hosts are h1..hn, in order.
	Hosts []*Host
	// Bridge is the namespace holding the bridge br0 when there are three
	// hosts or more ("" otherwise). Host i's veth ends there as port "pI".
	Bridge string
	// Subnet is the hosts' IPv4 subnet, 10.R.S.0/24; host i has 10.R.S.i.
	Subnet netip.Prefix
	// MTU is every link's MTU (0: the kernel's default, 1500).
	MTU int

	namespaces []string // created so far, deleted at cleanup
}

// Host is one network namespace with one interface facing the others.
type Host struct {
	Name   string           // "h1", ...; for Existing, the namespace name
	NS     string           // network namespace, as `ip netns` names it
	Iface  string           // the interface facing the other hosts ("eth0")
	IPv4   netip.Addr       // Iface's IPv4 address
	IPv6LL netip.Addr       // Iface's IPv6 link-local address, without zone: see Zone
	MAC    net.HardwareAddr // Iface's MAC address
	Index  int              // Iface's interface index in the namespace

	// Where this host's frames arrive: the other end of its veth. SetLoss
	// drops outgoing datagrams there, so that the sender sees no error.
	// Empty for Existing hosts.
	peerNS, peerIface string
	lossSet           bool // SetLoss created its tables (and their cleanup)
}

// Option configures New.
type Option func(*config)

type config struct {
	mtu int
}

// MTU sets the MTU of every link of the topology (default 1500).
func MTU(bytes int) Option { return func(c *config) { c.mtu = bytes } }

// New creates n hosts, h1..hn, and deletes them when the test ends. One host
// has a veth eth0 whose other end, peer0, is in the same namespace; two are joined by one veth pair (h1:eth0 <-> h2:eth0);
// three or more each have a veth to a bridge in an extra namespace, so no
// host is special. Host i gets 10.R.S.i/24 (R and S random per topology),
// MAC 02:76:72:R:S:i and the link-local IPv6 address the kernel derives
// from it; New returns when those addresses are usable (DAD is disabled).
func New(t testing.TB, n int, opts ...Option) *Topology {
	t.Helper()
	Require(t)
	if n < 1 || n > 250 {
		t.Fatalf("netns.New: %d hosts: want 1 to 250", n)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	var rnd [5]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	// 10.100.0.0 to 10.199.255.0: clear of the interop subnet 10.47.91.0/24.
	r, s := 100+rnd[0]%100, rnd[1]
	top := &Topology{
		ID:     "vrdma-" + hex.EncodeToString(rnd[2:]),
		Subnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, r, s, 0}), 24),
		MTU:    cfg.mtu,
	}
	t.Cleanup(func() {
		for _, ns := range top.namespaces {
			if err := ipCmd("netns", "del", ns); err != nil {
				t.Errorf("netns cleanup: %v", err)
			}
		}
	})
	if err := top.build(n, r, s); err != nil {
		t.Fatalf("netns.New(%d): %v", n, err)
	}
	return top
}

func (top *Topology) build(n int, r, s byte) error {
	for i := 1; i <= n; i++ {
		h := &Host{
			Name:  fmt.Sprintf("h%d", i),
			NS:    fmt.Sprintf("%s-h%d", top.ID, i),
			Iface: "eth0",
			IPv4:  netip.AddrFrom4([4]byte{10, r, s, byte(i)}),
			MAC:   net.HardwareAddr{0x02, 0x76, 0x72, r, s, byte(i)}, // 0x76 0x72: "vr"
		}
		if err := top.addNamespace(h.NS); err != nil {
			return err
		}
		// Addresses are usable at once, without duplicate address
		// detection's second of "tentative": nobody else is on the link.
		if err := h.Do(func() error {
			return setSysctls(map[string]string{
				"net/ipv6/conf/all/accept_dad":     "0",
				"net/ipv6/conf/default/accept_dad": "0",
			})
		}); err != nil {
			return err
		}
		top.Hosts = append(top.Hosts, h)
	}
	mtu := func() []string {
		if top.MTU == 0 {
			return nil
		}
		return []string{"mtu", fmt.Sprint(top.MTU)}
	}
	hs := top.Hosts
	switch {
	case n == 1:
		// A veth whose other end, "peer0", stays in the namespace (not every
		// kernel has the dummy link type).
		h := hs[0]
		args := append([]string{"-n", h.NS, "link", "add", h.Iface, "address", h.MAC.String()}, mtu()...)
		args = append(append(args, "type", "veth", "peer", "name", "peer0"), mtu()...)
		if err := ipCmd(args...); err != nil {
			return err
		}
		if err := ipCmd("-n", h.NS, "link", "set", "peer0", "up"); err != nil {
			return err
		}
		h.peerNS, h.peerIface = h.NS, "peer0"
	case n == 2:
		a, b := hs[0], hs[1]
		args := append([]string{"-n", a.NS, "link", "add", a.Iface, "address", a.MAC.String()}, mtu()...)
		args = append(append(args, "type", "veth", "peer", "name", b.Iface, "address", b.MAC.String()), mtu()...)
		if err := ipCmd(append(args, "netns", b.NS)...); err != nil {
			return err
		}
		a.peerNS, a.peerIface = b.NS, b.Iface
		b.peerNS, b.peerIface = a.NS, a.Iface
	default:
		top.Bridge = top.ID + "-br"
		if err := top.addNamespace(top.Bridge); err != nil {
			return err
		}
		br := &Host{Name: "br", NS: top.Bridge}
		if err := br.Do(func() error {
			return setSysctls(map[string]string{"net/ipv6/conf/all/disable_ipv6": "1", "net/ipv6/conf/default/disable_ipv6": "1"})
		}); err != nil {
			return err
		}
		// No STP, no forwarding delay, no multicast snooping (which would
		// withhold neighbour discovery's multicast until a querier appears).
		args := append([]string{"-n", top.Bridge, "link", "add", "br0"}, mtu()...)
		args = append(args, "type", "bridge", "stp_state", "0", "forward_delay", "0", "mcast_snooping", "0")
		if err := ipCmd(args...); err != nil {
			return err
		}
		for i, h := range hs {
			port := fmt.Sprintf("p%d", i+1)
			args := append([]string{"-n", h.NS, "link", "add", h.Iface, "address", h.MAC.String()}, mtu()...)
			args = append(append(args, "type", "veth", "peer", "name", port), mtu()...)
			if err := ipCmd(append(args, "netns", top.Bridge)...); err != nil {
				return err
			}
			if err := ipCmd("-n", top.Bridge, "link", "set", port, "master", "br0", "up"); err != nil {
				return err
			}
			h.peerNS, h.peerIface = top.Bridge, port
		}
		if err := ipCmd("-n", top.Bridge, "link", "set", "br0", "up"); err != nil {
			return err
		}
	}
	for _, h := range hs {
		if err := ipCmd("-n", h.NS, "addr", "add", netip.PrefixFrom(h.IPv4, 24).String(), "dev", h.Iface); err != nil {
			return err
		}
		if err := ipCmd("-n", h.NS, "link", "set", h.Iface, "up"); err != nil {
			return err
		}
	}
	for _, h := range hs {
		ll, err := waitLinkLocal(h.NS, h.Iface, readyTimeout)
		if err != nil {
			return err
		}
		h.IPv6LL = ll
		if err := h.Do(func() error {
			ifi, err := net.InterfaceByName(h.Iface)
			if err == nil {
				h.Index = ifi.Index
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func (top *Topology) addNamespace(ns string) error {
	if err := ipCmd("netns", "add", ns); err != nil {
		return err
	}
	top.namespaces = append(top.namespaces, ns)
	return ipCmd("-n", ns, "link", "set", "lo", "up")
}

// Existing returns a Host for a namespace that something else created (and
// will delete), such as the interop scripts' "rxeinterop", with iface as
// the interface facing the other hosts. Its addresses are read from the
// namespace, waiting for the link-local address to leave DAD if it has one.
// SetLoss on such a host drops outgoing datagrams at iface's egress, where
// a sender using a packet socket sees ENOBUFS for each one dropped.
func Existing(t testing.TB, ns, iface string) *Host {
	t.Helper()
	Require(t)
	if _, err := os.Stat(filepath.Join(nsDir, ns)); err != nil {
		t.Fatalf("netns.Existing: no namespace %q: %v", ns, err)
	}
	h := &Host{Name: ns, NS: ns, Iface: iface}
	if err := h.Do(func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		h.MAC, h.Index = ifi.HardwareAddr, ifi.Index
		addrs, err := ifi.Addrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !h.IPv4.IsValid() {
				h.IPv4 = p.Addr()
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("netns.Existing(%q, %q): %v", ns, iface, err)
	}
	disabled, _ := h.readSysctl("net/ipv6/conf/" + iface + "/disable_ipv6")
	if disabled != "1" {
		ll, err := waitLinkLocal(ns, iface, readyTimeout)
		if err != nil {
			t.Fatalf("netns.Existing: %v", err)
		}
		h.IPv6LL = ll
	}
	return h
}

// Zone returns the zone for link-local addresses reached from this host:
// its Iface's index, in decimal, e.g. h2.IPv6LL.WithZone(h1.Zone()) for h1
// to talk to h2. Not the name: Go's net package turns zone names into
// indexes through one cache for the whole process, blind to namespaces, so
// "eth0" may well come out as another namespace's eth0.
func (h *Host) Zone() string { return strconv.Itoa(h.Index) }

// Command returns a command that runs name inside the host's namespace
// (through `ip netns exec`, which execs it in place: the process's PID is
// the program's). It is killed if ctx ends first, like exec.CommandContext.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Run runs name inside the namespace and returns its standard output; if it
// fails, the test fails with both outputs. Call it from the test's goroutine.
func (h *Host) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	return runCmd(t, h.Command(t.Context(), name, args...))
}

func runCmd(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// Do runs fn in the host's network namespace: on a goroutine locked to its
// OS thread, moved into the namespace with setns(2) and back into the
// namespace it came from when fn returns. Only a thread that is back is
// unlocked for reuse; one that could not go back stays locked, so the
// runtime ends it (or, for the process's main thread, parks it for ever)
// instead of reusing it. Going back matters for the main thread: it is the
// thread group's leader, and /proc/self/net (/proc/net/tcp, ...) shows the
// leader's namespace to every thread of the process. Sockets fn opens
// belong to the namespace for their whole life and may be used anywhere
// afterwards; goroutines fn starts do not run in the namespace. fn must not
// call t.Fatal and the like (it is not the test's goroutine).
func (h *Host) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer home.Close()
		f, err := os.Open(filepath.Join(nsDir, h.NS))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
		f.Close()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", h.NS, err)
			return
		}
		err = fn()
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// setSysctls writes /proc/sys/KEY = VALUE for each entry; in Do, the keys
// under net/ are the namespace's own.
func setSysctls(kv map[string]string) error {
	for k, v := range kv {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0); err != nil {
			return err
		}
	}
	return nil
}

func (h *Host) readSysctl(key string) (string, error) {
	var v string
	err := h.Do(func() error {
		b, err := os.ReadFile(filepath.Join("/proc/sys", key))
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

// waitLinkLocal waits until iface in ns has an fe80:: address that is not
// tentative (still in duplicate address detection) and returns it.
func waitLinkLocal(ns, iface string, limit time.Duration) (netip.Addr, error) {
	deadline := time.Now().Add(limit)
	for {
		out, err := exec.Command("ip", "-n", ns, "-6", "-o", "addr", "show", "dev", iface, "scope", "link").CombinedOutput()
		if err != nil {
			return netip.Addr{}, fmt.Errorf("ip -n %s -6 addr show dev %s: %v: %s", ns, iface, err, bytes.TrimSpace(out))
		}
		if a, ok := parseLinkLocal(string(out)); ok {
			return a, nil
		}
		if time.Now().After(deadline) {
			return netip.Addr{}, fmt.Errorf("%s: %s has no usable IPv6 link-local address after %v:\n%s", ns, iface, limit, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// parseLinkLocal finds, in `ip -6 -o addr show` output, an fe80:: address
// whose flags do not include "tentative" (nor "dadfailed").
func parseLinkLocal(out string) (netip.Addr, bool) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet6" {
				continue
			}
			p, err := netip.ParsePrefix(f[i+1])
			if err != nil || !p.Addr().IsLinkLocalUnicast() {
				continue
			}
			if strings.Contains(line, "tentative") || strings.Contains(line, "dadfailed") {
				continue
			}
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
