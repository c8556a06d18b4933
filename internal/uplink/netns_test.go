package uplink

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A pair of network namespaces joined by a veth pair, made for one test and
// deleted after it: the only place the root-only tests send packets.

type side struct {
	ns   string // network namespace name (under /run/netns)
	dev  string // its end of the veth pair
	mac  net.HardwareAddr
	v4   netip.Addr // 10.x.y.1 or .2 /24
	v6   netip.Addr // fd00:x:y::1 or ::2 /64
	ll   netip.Addr // fe80:: EUI-64 of mac, the GID 0
	peer *side
}

type testNet struct{ a, b side }

// needRoot skips a test that needs root and iproute2.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates network namespaces and opens raw sockets")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip command to create network namespaces")
	}
}

func ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newTestNet creates two namespaces vrdmaul-<random>a and ...b, a veth pair
// between them with IPv4, IPv6 and EUI-64 link-local addresses (no
// duplicate address detection), both ends up.
func newTestNet(t testing.TB) *testNet {
	t.Helper()
	needRoot(t)
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(r[:3])
	n := &testNet{}
	for i, s := range []*side{&n.a, &n.b} {
		s.ns = "vrdmaul-" + id + string(rune('a'+i))
		s.dev = "vul" + id + string(rune('a'+i))
		s.mac = net.HardwareAddr{0x02, 0x00, r[0], r[1], r[2], byte(i + 1)}
		s.v4 = netip.AddrFrom4([4]byte{10, 128 | r[0]&0x7f, r[1], byte(i + 1)})
		s.v6 = netip.AddrFrom16([16]byte{0: 0xfd, 2: r[0], 3: r[1], 4: r[2], 15: byte(i + 1)})
		s.ll = netip.AddrFrom16(linkLocalGID(s.mac))
		ip(t, "netns", "add", s.ns)
		ns := s.ns
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	n.a.peer, n.b.peer = &n.b, &n.a
	ip(t, "link", "add", n.a.dev, "address", n.a.mac.String(), "netns", n.a.ns, "type", "veth",
		"peer", "name", n.b.dev, "address", n.b.mac.String(), "netns", n.b.ns)
	for _, s := range []*side{&n.a, &n.b} {
		ip(t, "-n", s.ns, "link", "set", s.dev, "addrgenmode", "none")
		ip(t, "-n", s.ns, "addr", "add", s.v4.String()+"/24", "dev", s.dev)
		ip(t, "-n", s.ns, "addr", "add", s.v6.String()+"/64", "dev", s.dev, "nodad")
		ip(t, "-n", s.ns, "addr", "add", s.ll.String()+"/64", "dev", s.dev, "nodad")
		ip(t, "-n", s.ns, "link", "set", "lo", "up")
		ip(t, "-n", s.ns, "link", "set", s.dev, "up")
	}
	return n
}

// inNS runs f on a thread in namespace ns. The thread is never unlocked,
// so it ends with the goroutine instead of going back to the scheduler in
// the wrong namespace.
func inNS(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// openIn opens a link in namespace ns and closes it when the test ends.
func openIn(t testing.TB, ns string, cfg Config) *Link {
	t.Helper()
	l, err := tryOpenIn(ns, cfg)
	if err != nil {
		t.Fatalf("Open %+v in %s: %v", cfg, ns, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func tryOpenIn(ns string, cfg Config) (*Link, error) {
	var l *Link
	err := inNS(ns, func() error {
		var err error
		l, err = Open(cfg)
		return err
	})
	return l, err
}

// bindUDP tries to bind a UDP socket to addr:port in namespace ns (with
// IP_FREEBIND, so an address that is gone binds too) and closes it.
func bindUDP(ns string, addr netip.Addr, ifindex int, port uint16) error {
	return inNS(ns, func() error {
		fam := unix.AF_INET
		var sa unix.Sockaddr
		if addr.Is4() {
			sa = &unix.SockaddrInet4{Port: int(port), Addr: addr.As4()}
		} else {
			fam = unix.AF_INET6
			sa = &unix.SockaddrInet6{Port: int(port), Addr: addr.As16(), ZoneId: uint32(ifindex)}
		}
		fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_FREEBIND, 1); err != nil {
			return err
		}
		return unix.Bind(fd, sa)
	})
}
