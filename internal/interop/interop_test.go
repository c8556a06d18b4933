package interop

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/netns"
)

// udpTimeout bounds a wait for a datagram between the namespace and a
// guest: reaching it means the link is broken.
const udpTimeout = 20 * time.Second

func TestGuestRxe(t *testing.T) {
	g := sharedGuests(t)
	t.Logf("boot time of guest A: %.2f s", g.BootTime.Seconds())

	info := g.Exec(t, "A", 30, "ibv_devinfo -v -d rxe0")
	if !strings.Contains(info, "PORT_ACTIVE") {
		t.Errorf("ibv_devinfo -v -d rxe0: no PORT_ACTIVE:\n%s", info)
	}
	gids := GIDs(info)
	if i := GIDIndex(gids, netip.AddrFrom16(GuestIP("A").As16())); i < 0 {
		t.Errorf("rxe0 has no GID ::ffff:%s: %v\n%s", GuestIP("A"), gids, info)
	} else {
		t.Logf("rxe0: GID[%d] = ::ffff:%s; GIDs %v", i, GuestIP("A"), gids)
	}
	if link := g.Exec(t, "A", 30, "rdma link"); !regexp.MustCompile(`rxe0/1 state ACTIVE .*netdev eth0`).MatchString(link) {
		t.Errorf("rdma link: rxe0 is not active on eth0:\n%s", link)
	}

	host := g.Host(t)
	if host.IPv4 != HostIP || !host.IPv6LL.IsLinkLocalUnicast() {
		t.Errorf("the namespace's %s has %s and %s, want %s and a link-local IPv6 address", HostIface, host.IPv4, host.IPv6LL, HostIP)
	}

	t.Run("UDP namespace to guest", func(t *testing.T) {
		const port = 9999
		id := g.Spawn(t, "A", 30, fmt.Sprintf("/usr/bin/nc.openbsd -u -l -W 1 %d", port))
		msg := "to the guest from " + g.NS()
		dst := netip.AddrPortFrom(GuestIP("A"), port)
		// The listener binds a moment after the guest starts it: send until
		// it has received one.
		deadline := time.Now().Add(udpTimeout)
		for !g.Done("A", id) && time.Now().Before(deadline) {
			if err := host.Do(func() error {
				c, err := net.Dial("udp", dst.String())
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write([]byte(msg + "\n"))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		out, rc := g.Wait(t, "A", id, 10)
		if rc != 0 || !strings.Contains(out, msg) {
			t.Errorf("guest's nc: exit %d, output %q; want %q", rc, out, msg)
		}
	})

	t.Run("UDP guest to namespace", func(t *testing.T) {
		const port = 9998
		var c *net.UDPConn
		if err := host.Do(func() (err error) {
			c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(HostIP, port)))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		msg := "to the namespace from guest A"
		g.Exec(t, "A", 30, fmt.Sprintf("echo '%s' | /usr/bin/nc.openbsd -u -w 1 %s %d", msg, HostIP, port))
		c.SetReadDeadline(time.Now().Add(udpTimeout))
		buf := make([]byte, 1500)
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("no datagram from the guest: %v", err)
		}
		if got := strings.TrimSpace(string(buf[:n])); got != msg || from.Addr() != GuestIP("A") {
			t.Errorf("got %q from %s, want %q from %s", got, from, msg, GuestIP("A"))
		}
	})
}

// hostDev is the adapter the host side uses: the default instance's
// vrdma0, whose GID table is the link's once `vrdma link add` made one.
const hostDev = "vrdma0"

// pingpongPort is ibv_rc_pingpong's TCP port (0x4853).
const pingpongPort = 18515

var bytesLine = regexp.MustCompile(`\d+ bytes in [0-9.]+ seconds`)

// TestPingpongWithRxe runs ibv_rc_pingpong in guest A against
// `vrdma pingpong` in the namespace, each as server and as client, over
// IPv4-mapped and IPv6 link-local GIDs, with one-packet and multi-packet
// messages.
func TestPingpongWithRxe(t *testing.T) {
	g := sharedGuests(t)
	host := g.Host(t)
	d := host.StartDaemon(t)
	d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", HostIface)
	ours := GIDs(d.Vrdma(t, "devinfo", "-v", "-d", hostDev))
	gidPairs := pairGIDs(t, g, host, ours)

	type testCase struct {
		name          string
		guestServer   bool
		oursI, theirI int
		size          int
	}
	var tests []testCase
	for _, server := range []bool{true, false} {
		for _, p := range gidPairs {
			for _, size := range []int{64, 4096} {
				role := "guest client"
				if server {
					role = "guest server"
				}
				tests = append(tests, testCase{fmt.Sprintf("%s, %s, %d bytes", role, p.name, size), server, p.oursI, p.theirI, size})
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := fmt.Sprintf("-g %d -s %d -n 5", tt.theirI, tt.size)
			ourArgs := []string{"pingpong", "-d", hostDev, "-g", fmt.Sprint(tt.oursI), "-s", fmt.Sprint(tt.size), "-n", "5"}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			var ourOut bytes.Buffer
			var ourErr error
			var guestOut string
			var guestRC int
			if tt.guestServer {
				id := g.Spawn(t, "A", 60, "ibv_rc_pingpong -d rxe0 "+opts)
				// Connecting before it listens would fail, and a probe
				// connection would be taken for the client: look instead.
				if out, rc := g.Run(t, "A", 30, listeningScript(pingpongPort)); rc != 0 {
					t.Fatalf("ibv_rc_pingpong in the guest is not listening on %d: %s", pingpongPort, out)
				}
				cmd := d.Command(ctx, append(ourArgs, GuestIP("A").String())...)
				cmd.Stdout, cmd.Stderr = &ourOut, &ourOut
				ourErr = cmd.Run()
				guestOut, guestRC = g.Wait(t, "A", id, 70)
			} else {
				cmd := d.Command(ctx, ourArgs...)
				cmd.Stdout, cmd.Stderr = &ourOut, &ourOut
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				if err := waitListening(cmd.Process.Pid, pingpongPort, 30*time.Second); err != nil {
					cancel()
					cmd.Wait()
					t.Fatalf("vrdma pingpong: %v\n%s", err, ourOut.String())
				}
				guestOut, guestRC = g.Run(t, "A", 60, fmt.Sprintf("ibv_rc_pingpong -d rxe0 %s %s", opts, HostIP))
				if guestRC != 0 {
					cancel() // our server would wait for a client forever
				}
				ourErr = cmd.Wait()
			}
			if ourErr != nil || !bytesLine.MatchString(ourOut.String()) {
				t.Errorf("vrdma %s: %v\n%s", strings.Join(ourArgs, " "), ourErr, ourOut.String())
			}
			if guestRC != 0 || !bytesLine.MatchString(guestOut) {
				t.Errorf("ibv_rc_pingpong %s in the guest: exit %d\n%s", opts, guestRC, guestOut)
			}
			if !t.Failed() {
				t.Logf("ours:\n%s\nguest's:\n%s", ourOut.String(), guestOut)
			}
		})
	}
	// With the bulk path on (the daemon's default), the 4096-byte messages'
	// MIDDLE and LAST packets went to rxe as GSO buffers, which the guest's
	// kernel cut: the exchanges above passing is rxe accepting them.
	if os.Getenv("VRDMA_LINK_GSO") != "0" && !t.Failed() {
		if out := d.Vrdma(t, "link", "show"); !regexp.MustCompile(`tx_gso [1-9]`).MatchString(out) {
			t.Errorf("the link sent no GSO buffer to rxe:\n%s", out)
		}
	}
}

// listeningScript is a guest shell command that waits (up to 20 s) until a
// TCP socket listens on port.
func listeningScript(port int) string {
	return fmt.Sprintf(`i=0; while ! grep -qE ':%04X [0-9A-F]+:0000 0A ' /proc/net/tcp /proc/net/tcp6 2>/dev/null; do `+
		`i=$((i+1)); [ $i -ge 200 ] && exit 1; sleep 0.1; done`, port)
}

// waitListening waits until process pid (in any namespace) has a TCP socket
// listening on port in its namespace.
func waitListening(pid, port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		for _, f := range []string{"tcp", "tcp6"} {
			b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "net", f))
			if err != nil {
				return fmt.Errorf("not running: %v", err)
			}
			if listening(b, port) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on TCP %d after %v", port, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listening reports whether /proc/net/tcp or tcp6 content shows a socket
// listening (state 0A) on port.
func listening(procNetTCP []byte, port int) bool {
	return regexp.MustCompile(fmt.Sprintf(`:%04X [0-9A-F]+:0000 0A `, port)).Match(procNetTCP)
}

func TestListening(t *testing.T) {
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"IPv4 listener", header + "   0: 00000000:4853 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 10698 1\n", true},
		{"IPv6 listener", header + "   0: 00000000000000000000000000000000:4853 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n", true},
		{"connected, not listening", header + "   1: FE5B2F0A:4853 015B2F0A:B0C4 01 00000000:00000000 00:00000000 00000000     0        0 1\n", false},
		{"other port", header + "   0: 00000000:4854 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n", false},
		{"nothing", header, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := listening([]byte(tt.in), pingpongPort); got != tt.want {
				t.Errorf("listening = %v, want %v", got, tt.want)
			}
		})
	}
	if !strings.Contains(listeningScript(pingpongPort), ":4853 ") {
		t.Errorf("listeningScript(%d) = %q: want port 4853 in hex", pingpongPort, listeningScript(pingpongPort))
	}
}

func TestGIDs(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []GID
	}{
		{"rdma-core", "\t\t\tGID[  0]:\t\tfe80::5054:ff:fe47:9101, RoCE v2\n\t\t\tGID[  1]:\t\t::ffff:10.47.91.1, RoCE v2\n",
			[]GID{{0, netip.MustParseAddr("fe80::5054:ff:fe47:9101"), "RoCE v2"}, {1, netip.MustParseAddr("::ffff:10.47.91.1"), "RoCE v2"}}},
		{"vrdma", "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:b84b:69ff:fe13:7143, RoCE v2\n\t\t\tGID[ 12]:\t\t0000:0000:0000:0000:0000:ffff:0a2f:5bfe, RoCE v2\n",
			[]GID{{0, netip.MustParseAddr("fe80::b84b:69ff:fe13:7143"), "RoCE v2"}, {12, netip.MustParseAddr("::ffff:10.47.91.254"), "RoCE v2"}}},
		{"no type", "GID[3]: fe80::1\n", []GID{{3, netip.MustParseAddr("fe80::1"), ""}}},
		{"other lines", "hca_id:\trxe0\n\tstate:\t\t\tPORT_ACTIVE (4)\n\tGID[  x]: fe80::1\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := GIDs(tt.in)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("GIDs = %v, want %v", got, tt.want)
			}
			for _, w := range tt.want {
				if i := GIDIndex(got, w.Addr); i != w.Index {
					t.Errorf("GIDIndex(%s) = %d, want %d", w.Addr, i, w.Index)
				}
			}
		})
	}
	if i := GIDIndex(GIDs(tests[0].in), netip.AddrFrom16(GuestIP("A").As16())); i != 1 {
		t.Errorf("GIDIndex(::ffff:%s) = %d, want 1", GuestIP("A"), i)
	}
}

func TestGuestIP(t *testing.T) {
	tests := []struct{ name, want string }{
		{"A", "10.47.91.1"}, {"B", "10.47.91.2"}, {"Z", "10.47.91.26"}, {"a", "invalid IP"}, {"AB", "invalid IP"}, {"", "invalid IP"},
	}
	for _, tt := range tests {
		if got := GuestIP(tt.name).String(); got != tt.want {
			t.Errorf("GuestIP(%q) = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestBuildStale(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	tests := []struct {
		name      string
		artefacts bool
		newInit   bool
		want      string
		oldKernel bool // vmlinux is older than setup.sh, the initramfs newer
	}{
		{"empty cache", false, false, "no vmlinux yet", false},
		{"built", true, false, "", false},
		{"init changed", true, true, "guest/init changed since the last build", false},
		// setup.sh keeps a kernel it extracted before and rebuilds only the
		// initramfs: the newest artefact says when it last ran.
		{"kernel kept from an older setup.sh", true, false, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, cache := t.TempDir(), t.TempDir()
			os.MkdirAll(filepath.Join(dir, "guest"), 0o755)
			for _, f := range []string{"setup.sh", "guest/init"} {
				p := filepath.Join(dir, f)
				os.WriteFile(p, []byte("x"), 0o644)
				os.Chtimes(p, old.Add(-time.Hour), old.Add(-time.Hour))
			}
			if tt.artefacts {
				for _, f := range []string{"vmlinux", "initramfs.cpio"} {
					p := filepath.Join(cache, f)
					os.WriteFile(p, []byte("x"), 0o644)
					os.Chtimes(p, old, old)
				}
			}
			if tt.oldKernel {
				older := old.Add(-2 * time.Hour)
				os.Chtimes(filepath.Join(cache, "vmlinux"), older, older)
			}
			if tt.newInit {
				os.Chtimes(filepath.Join(dir, "guest/init"), time.Now(), time.Now())
			}
			if got := buildStale(dir, cache); got != tt.want {
				t.Errorf("buildStale = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPackagesInstalledParsesSetup(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Skip(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "setup.sh"))
	if err != nil {
		t.Skipf("no shared interop setup.sh: %v", err)
	}
	m := hostPkgsRe.FindSubmatch(src)
	if m == nil || !strings.Contains(string(m[1]), "qemu-system-x86") {
		t.Fatalf("setup.sh's HOST_PKGS not found (setup.sh changed?): %q", m)
	}
}

// gidPair is a GID kind both ends have: its index in our table and in the
// guest's rxe0's.
type gidPair struct {
	name          string
	ours, theirs  netip.Addr
	oursI, theirI int
}

// pairGIDs finds, in our GID table (ours, from a devinfo of hostDev) and
// the guest's rxe0's, the IPv4-mapped GIDs and the IPv6 link-local ones.
func pairGIDs(t *testing.T, g *Guests, host *netns.Host, ours []GID) []gidPair {
	t.Helper()
	theirs := GIDs(g.Exec(t, "A", 30, "ibv_devinfo -v -d rxe0"))
	var guestLL netip.Addr
	for _, gid := range theirs {
		if gid.Addr.IsLinkLocalUnicast() {
			guestLL = gid.Addr
			break
		}
	}
	pairs := []gidPair{
		{name: "IPv4-mapped GID", ours: netip.AddrFrom16(HostIP.As16()), theirs: netip.AddrFrom16(GuestIP("A").As16())},
		{name: "IPv6 link-local GID", ours: host.IPv6LL, theirs: guestLL},
	}
	for i := range pairs {
		p := &pairs[i]
		p.oursI, p.theirI = GIDIndex(ours, p.ours), GIDIndex(theirs, p.theirs)
		if p.oursI < 0 || p.theirI < 0 {
			t.Fatalf("%s: %s is GID %d of our %s (GIDs %v), %s GID %d of the guest's rxe0 (GIDs %v)",
				p.name, p.ours, p.oursI, hostDev, ours, p.theirs, p.theirI, theirs)
		}
	}
	awaitGuestNeighbour(t, g, host.IPv6LL)
	return pairs
}

// awaitGuestNeighbour waits until the guest's eth0 has left duplicate address
// detection and its neighbour table reaches ll, our link-local address. The
// guest's eth0 comes up just before it says ready, and rdma_rxe's RTR for a
// RoCEv2 GID resolves the peer's MAC through the IP stack with a timeout of
// about a second: a test that starts while the guest's own link-local
// address is still tentative, or its neighbour solicitation unanswered,
// fails "Failed to modify QP to RTR" for reasons that are not the wire's.
func awaitGuestNeighbour(t *testing.T, g *Guests, ll netip.Addr) {
	t.Helper()
	script := fmt.Sprintf(`i=0; while /usr/sbin/ip -6 addr show dev eth0 | grep -q tentative; do `+
		`i=$((i+1)); [ $i -ge 100 ] && { echo "eth0 still tentative:"; /usr/sbin/ip -6 addr show dev eth0; exit 1; }; sleep 0.1; done; `+
		`i=0; until ping -6 -c 1 -W 1 -I eth0 %s >/dev/null 2>&1; do `+
		`i=$((i+1)); [ $i -ge 10 ] && { echo "no answer from %s"; /usr/sbin/ip -6 neigh show dev eth0; exit 1; }; done`, ll, ll)
	if out, rc := g.Run(t, "A", 30, script); rc != 0 {
		t.Fatalf("the guest cannot reach our link-local %s: exit %d\n%s", ll, rc, out)
	}
}
