package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// exchangeTimeout bounds one wait for a datagram on a link with no loss:
// reaching it means the topology is broken.
const exchangeTimeout = 10 * time.Second

// startEcho listens on UDP port in h's namespace (IPv4 and IPv6) and sends
// every datagram back until the test ends.
func startEcho(t *testing.T, h *Host, port int) {
	t.Helper()
	var c *net.UDPConn
	if err := h.Do(func() (err error) {
		c, err = net.ListenUDP("udp", &net.UDPAddr{Port: port})
		return err
	}); err != nil {
		t.Fatalf("echo on %s: %v", h.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
}

// echo sends a datagram from h to dst and waits for it to come back.
func echo(h *Host, dst netip.AddrPort) error {
	return h.Do(func() error {
		c, err := net.ListenUDP("udp", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		msg := []byte(fmt.Sprintf("%s to %s", h.Name, dst))
		if _, err := c.WriteToUDPAddrPort(msg, dst); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(exchangeTimeout))
		buf := make([]byte, 1500)
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		if string(buf[:n]) != string(msg) {
			return fmt.Errorf("echo %q, want %q", buf[:n], msg)
		}
		return nil
	})
}

func namespaceList(t *testing.T) string {
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	return string(out)
}

func TestTopology(t *testing.T) {
	Require(t)
	tests := []struct {
		name string
		n    int
		opts []Option
		mtu  int
	}{
		{"one host", 1, nil, 1500},
		{"two hosts", 2, nil, 1500},
		{"three hosts", 3, nil, 1500},
		{"two hosts, MTU 9000", 2, []Option{MTU(9000)}, 9000},
		{"three hosts, MTU 4200", 3, []Option{MTU(4200)}, 4200},
	}
	for _, tt := range tests {
		var id string
		t.Run(tt.name, func(t *testing.T) {
			top := New(t, tt.n, tt.opts...)
			id = top.ID
			if len(top.Hosts) != tt.n {
				t.Fatalf("%d hosts, want %d", len(top.Hosts), tt.n)
			}
			if (top.Bridge != "") != (tt.n >= 3) {
				t.Errorf("Bridge = %q with %d hosts", top.Bridge, tt.n)
			}
			for _, h := range top.Hosts {
				checkHost(t, top, h, tt.mtu)
			}
			const port = 7
			for _, h := range top.Hosts {
				startEcho(t, h, port)
			}
			for _, from := range top.Hosts {
				for _, to := range top.Hosts {
					if from == to {
						continue
					}
					for _, dst := range []netip.AddrPort{
						netip.AddrPortFrom(to.IPv4, port),
						netip.AddrPortFrom(to.IPv6LL.WithZone(from.Zone()), port),
					} {
						if err := echo(from, dst); err != nil {
							t.Errorf("%s -> %s (%s): %v", from.Name, to.Name, dst, err)
						}
					}
				}
			}
			if !strings.Contains(namespaceList(t), top.ID) {
				t.Errorf("ip netns list does not show %s", top.ID)
			}
		})
		if id != "" && strings.Contains(namespaceList(t), id) {
			t.Errorf("%s: namespaces %s* left behind:\n%s", tt.name, id, namespaceList(t))
		}
	}
}

// checkHost compares the Host's fields with what its namespace says.
func checkHost(t *testing.T, top *Topology, h *Host, mtu int) {
	t.Helper()
	if !top.Subnet.Contains(h.IPv4) {
		t.Errorf("%s: IPv4 %s outside %s", h.Name, h.IPv4, top.Subnet)
	}
	if !h.IPv6LL.IsLinkLocalUnicast() {
		t.Errorf("%s: IPv6LL %s is not link-local", h.Name, h.IPv6LL)
	}
	err := h.Do(func() error {
		ifi, err := net.InterfaceByName(h.Iface)
		if err != nil {
			return err
		}
		if ifi.MTU != mtu {
			return fmt.Errorf("MTU %d, want %d", ifi.MTU, mtu)
		}
		if ifi.Index != h.Index {
			return fmt.Errorf("index %d, Host.Index %d", ifi.Index, h.Index)
		}
		if ifi.HardwareAddr.String() != h.MAC.String() {
			return fmt.Errorf("MAC %s, Host.MAC %s", ifi.HardwareAddr, h.MAC)
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return err
		}
		var have []string
		for _, a := range addrs {
			have = append(have, a.String())
		}
		for _, want := range []string{h.IPv4.String() + "/24", h.IPv6LL.String() + "/64"} {
			if !strings.Contains(strings.Join(have, " "), want) {
				return fmt.Errorf("addresses %v, missing %s", have, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("%s: %v", h.Name, err)
	}
}

func netnsID(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestDo(t *testing.T) {
	top := New(t, 2)
	root := netnsID(t, "/proc/thread-self/ns/net")
	for _, h := range top.Hosts {
		want := netnsID(t, nsDir+"/"+h.NS)
		var got uint64
		if err := h.Do(func() error {
			var st syscall.Stat_t
			err := syscall.Stat("/proc/thread-self/ns/net", &st)
			got = st.Ino
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got != want || got == root {
			t.Errorf("%s: Do ran in namespace %d, want %d (root %d)", h.Name, got, want, root)
		}
	}
	errDone := errors.New("done")
	if err := top.Hosts[0].Do(func() error { return errDone }); err != errDone {
		t.Errorf("Do returned %v, want fn's error", err)
	}
	// The threads Do used are gone: every thread the test process runs
	// goroutines on is still in the root namespace.
	for range 4 * runtime.GOMAXPROCS(0) {
		c := make(chan uint64)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var st syscall.Stat_t
			syscall.Stat("/proc/thread-self/ns/net", &st)
			c <- st.Ino
		}()
		if ns := <-c; ns != root {
			t.Fatalf("a thread of the test process is in namespace %d, not the root's %d", ns, root)
		}
	}
}

func TestSetLoss(t *testing.T) {
	Require(t)
	tests := []struct {
		name   string
		hosts  int
		lossOn int // index of the host with the loss: 0 the sender, 1 the receiver
		ipv6   bool
	}{
		{"sender, IPv4", 2, 0, false},
		{"receiver, IPv4", 2, 1, false},
		{"sender, IPv6 link-local", 2, 0, true},
		{"receiver, IPv6 link-local", 2, 1, true},
		{"sender, bridge, IPv4", 3, 0, false},
		{"receiver, bridge, IPv6 link-local", 3, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := New(t, tt.hosts)
			from, to := top.Hosts[0], top.Hosts[1]
			lossy := top.Hosts[tt.lossOn]
			dst := func(port int) netip.AddrPort {
				if tt.ipv6 {
					return netip.AddrPortFrom(to.IPv6LL.WithZone(from.Zone()), uint16(port))
				}
				return netip.AddrPortFrom(to.IPv4, uint16(port))
			}
			roce := receiver(t, to, RoCEv2Port)
			other := receiver(t, to, RoCEv2Port+1)
			send := func(n, port int) {
				t.Helper()
				if err := sendDatagrams(from, dst(port), n); err != nil {
					t.Fatal(err)
				}
			}

			lossy.SetLoss(t, 100)
			send(10, RoCEv2Port)
			waitFor(t, "10 datagrams dropped", func() bool { return lossy.Dropped(t) == 10 })
			send(1, RoCEv2Port+1) // other ports pass, and after the dropped ones
			if err := receive(other, 1); err != nil {
				t.Fatalf("port %d with loss on port %d: %v", RoCEv2Port+1, RoCEv2Port, err)
			}
			if n := len(roce); n != 0 {
				t.Errorf("%d datagrams arrived with 100%% loss", n)
			}

			lossy.SetLoss(t, 0)
			send(10, RoCEv2Port)
			if err := receive(roce, 10); err != nil {
				t.Fatalf("after SetLoss(0): %v", err)
			}
			if n := lossy.Dropped(t); n != 10 {
				t.Errorf("Dropped = %d after SetLoss(0), want still 10", n)
			}

			// 50 %: of 200, some arrive and some are dropped (all of them
			// either way with probability 2^-199).
			lossy.SetLoss(t, 50)
			const n = 200
			send(n, RoCEv2Port)
			got := 0
			waitFor(t, "every datagram received or dropped", func() bool {
				got += len(drain(roce))
				return got+lossy.Dropped(t)-10 == n
			})
			if got == 0 || got == n {
				t.Errorf("50%% loss: %d of %d arrived", got, n)
			}
			t.Logf("50%% loss: %d of %d arrived", got, n)
		})
	}
}

// receiver counts the datagrams arriving on UDP port in h's namespace.
func receiver(t *testing.T, h *Host, port int) chan struct{} {
	t.Helper()
	var c *net.UDPConn
	if err := h.Do(func() (err error) {
		c, err = net.ListenUDP("udp", &net.UDPAddr{Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	got := make(chan struct{}, 1000)
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
			got <- struct{}{}
		}
	}()
	return got
}

func receive(c chan struct{}, n int) error {
	for i := range n {
		select {
		case <-c:
		case <-time.After(exchangeTimeout):
			return fmt.Errorf("%d of %d datagrams arrived", i, n)
		}
	}
	return nil
}

func drain(c chan struct{}) []struct{} {
	var got []struct{}
	for {
		select {
		case v := <-c:
			got = append(got, v)
		default:
			return got
		}
	}
}

func sendDatagrams(h *Host, dst netip.AddrPort, n int) error {
	return h.Do(func() error {
		c, err := net.ListenUDP("udp", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		for i := range n {
			if _, err := c.WriteToUDPAddrPort([]byte(fmt.Sprint(i)), dst); err != nil {
				return err
			}
		}
		return nil
	})
}

// waitFor polls cond until it holds; the test fails if it has not after
// exchangeTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(exchangeTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: still not the case after %v", what, exchangeTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDaemon(t *testing.T) {
	Require(t)
	var pids []int
	t.Run("two hosts", func(t *testing.T) {
		top := New(t, 2)
		guids := map[string]string{}
		for _, h := range top.Hosts {
			d := h.StartDaemon(t)
			pids = append(pids, d.Cmd.Process.Pid)
			out := d.Vrdma(t, "devices")
			if !strings.Contains(out, "vrdma0") {
				t.Errorf("%s: vrdma devices:\n%s\nwant vrdma0", h.Name, out)
			}
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "vrdma0" {
					guids[f[1]] = h.Name
				}
			}
			pidNS := netnsID(t, fmt.Sprintf("/proc/%d/ns/net", d.Cmd.Process.Pid))
			if want := netnsID(t, nsDir+"/"+h.NS); pidNS != want {
				t.Errorf("%s: the daemon runs in namespace %d, want %d", h.Name, pidNS, want)
			}
			if _, err := os.Stat(d.Socket); err != nil {
				t.Errorf("%s: %v", h.Name, err)
			}
		}
		t.Logf("vrdma0 node GUIDs: %v", guids)
		if len(guids) != 2 {
			t.Errorf("the two daemons' vrdma0 have node GUIDs %v: want two different ones", guids)
		}
	})
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("daemon pid %d still exists after the test", pid)
		}
	}
}

func TestExisting(t *testing.T) {
	Require(t)
	ns := fmt.Sprintf("vrdma-existing-%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() {
		if err := ipCmd("netns", "del", ns); err != nil {
			t.Error(err)
		}
	})
	// veth0 faces veth1 in the same namespace; with a static neighbour
	// entry, datagrams to 192.0.2.2 leave through veth0 without ARP.
	run("-n", ns, "link", "add", "veth0", "address", "02:00:00:00:00:01", "type", "veth", "peer", "name", "veth1")
	run("-n", ns, "addr", "add", "192.0.2.1/24", "dev", "veth0")
	run("-n", ns, "link", "set", "veth0", "up")
	run("-n", ns, "link", "set", "veth1", "up")
	run("-n", ns, "neigh", "add", "192.0.2.2", "lladdr", "02:00:00:00:00:02", "dev", "veth0")

	h := Existing(t, ns, "veth0") // waits for DAD, which is on here
	if h.IPv4 != netip.MustParseAddr("192.0.2.1") || h.MAC.String() != "02:00:00:00:00:01" {
		t.Errorf("Existing: IPv4 %s, MAC %s", h.IPv4, h.MAC)
	}
	if want := netip.MustParseAddr("fe80::ff:fe00:1"); h.IPv6LL != want {
		t.Errorf("Existing: IPv6LL %s, want %s", h.IPv6LL, want)
	}
	if out := h.Run(t, "ip", "-o", "link", "show", "veth0"); !strings.Contains(out, "veth0") {
		t.Errorf("Run: %q", out)
	}
	h.SetLoss(t, 100) // at veth0's egress
	if err := sendDatagrams(h, netip.MustParseAddrPort("192.0.2.2:4791"), 3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 datagrams dropped", func() bool { return h.Dropped(t) == 3 })
}

func TestParseLinkLocal(t *testing.T) {
	tests := []struct {
		name, out, want string
	}{
		{"ready", "2: eth0    inet6 fe80::76:72ff:fe64:101/64 scope link \\       valid_lft forever preferred_lft forever\n", "fe80::76:72ff:fe64:101"},
		{"tentative", "2: eth0    inet6 fe80::1/64 scope link tentative \\       valid_lft forever preferred_lft forever\n", ""},
		{"dad failed", "2: eth0    inet6 fe80::1/64 scope link dadfailed tentative \\ valid_lft forever\n", ""},
		{"none", "", ""},
		{"global only", "2: eth0    inet6 2001:db8::1/64 scope global \\ valid_lft forever\n", ""},
		{"second is ready", "2: eth0    inet6 fe80::1/64 scope link tentative \\ x\n2: eth0    inet6 fe80::2/64 scope link \\ x\n", "fe80::2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok := parseLinkLocal(tt.out)
			got := ""
			if ok {
				got = a.String()
			}
			if got != tt.want {
				t.Errorf("parseLinkLocal = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseCounter(t *testing.T) {
	tests := []struct {
		name string
		js   string
		want int
		err  bool
	}{
		{"counter", `{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}}, {"counter": {"family": "netdev", "name": "dropped", "table": "vrdma_loss_h1", "handle": 1, "packets": 42, "bytes": 1806}}]}`, 42, false},
		{"no counter", `{"nftables": [{"metainfo": {"version": "1.0.6"}}]}`, 0, true},
		{"not json", `table netdev x`, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCounter([]byte(tt.js))
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("parseCounter = %d, %v; want %d, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}
