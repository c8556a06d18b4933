package uplink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// collector serves a link and keeps a copy of every frame delivered. It
// fails the test if deliver is ever called by two goroutines at once.
type collector struct {
	frames  chan []byte
	done    chan error
	busy    atomic.Int32
	overlap atomic.Bool
}

func serve(t testing.TB, l *Link) *collector {
	t.Helper()
	c := &collector{frames: make(chan []byte, 4096), done: make(chan error, 1)}
	go func() {
		c.done <- l.Serve(func(f []byte) {
			if c.busy.Add(1) != 1 {
				c.overlap.Store(true)
			}
			select {
			case c.frames <- append([]byte(nil), f...):
			default:
			}
			c.busy.Add(-1)
		})
	}()
	t.Cleanup(func() {
		l.Close()
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
		if c.overlap.Load() {
			t.Errorf("link %s called deliver from two goroutines at once", l.Name())
		}
	})
	return c
}

// next returns the next frame delivered, failing the test after a while.
func (c *collector) next(t testing.TB) []byte {
	t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no frame delivered within 5 s")
		return nil
	}
}

// none checks that nothing more was delivered.
func (c *collector) none(t testing.TB) {
	t.Helper()
	select {
	case f := <-c.frames:
		t.Fatalf("unexpected frame delivered: %x", f)
	default:
	}
}

func send(t testing.TB, l *Link, frames ...[]byte) {
	t.Helper()
	n, err := l.WriteBatch(frames)
	if err != nil || n != len(frames) {
		t.Fatalf("WriteBatch: %d of %d sent, %v", n, len(frames), err)
	}
}

// pair opens a link on each end of a new veth pair, on the RoCEv2 port
// (the namespaces are the test's own), and serves both.
func pair(t testing.TB) (*testNet, *Link, *Link, *collector, *collector) {
	n := newTestNet(t)
	la := openIn(t, n.a.ns, Config{Name: "a", Netdev: n.a.dev})
	lb := openIn(t, n.b.ns, Config{Name: "b", Netdev: n.b.dev})
	return n, la, lb, serve(t, la), serve(t, lb)
}

func TestLinkCarriesFramesByteForByte(t *testing.T) {
	n, la, lb, ca, cb := pair(t)
	payload := bytes.Repeat([]byte("vrdma RoCEv2 "), 40)
	tests := []struct {
		name     string
		from     *Link
		to       *collector
		frame    []byte
		id, sp   uint16 // IPv4: what must arrive
		tos      uint8
		wantDest netip.Addr
	}{
		{"IPv4 a to b", la, cb, testFrame4(n.a.v4, n.b.v4, 0x1234, 26<<2, 0xC121, DefaultPort, payload), 0x1234, 0xC121, 26 << 2, n.b.v4},
		{"IPv4 b to a, ECN bits", lb, ca, testFrame4(n.b.v4, n.a.v4, 0xFFFF, 46<<2|2, 0xD353, DefaultPort, payload[:4]), 0xFFFF, 0xD353, 46<<2 | 2, n.a.v4},
		{"IPv6 a to b", la, cb, testFrame6(n.a.v6, n.b.v6, 26<<2, 0x12345, 0xC121, DefaultPort, payload), 0, 0, 0, n.b.v6},
		{"IPv6 link-local b to a", lb, ca, testFrame6(n.b.ll, n.a.ll, 0, 0, 0xD873, DefaultPort, payload[:8]), 0, 0, 0, n.a.ll},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			send(t, tt.from, tt.frame)
			got := tt.to.next(t)
			if !bytes.Equal(got, tt.frame) {
				t.Fatalf("delivered frame differs:\n got %x\nwant %x", got, tt.frame)
			}
			if !icrcOK(got) {
				t.Errorf("ICRC of the delivered frame does not verify")
			}
			if tt.frame[0]>>4 == 4 {
				if id, tos, sp := binary.BigEndian.Uint16(got[4:]), got[1], binary.BigEndian.Uint16(got[20:]); id != tt.id || tos != tt.tos || sp != tt.sp {
					t.Errorf("IPv4 ID %#x TOS %#x sport %#x arrived, want %#x %#x %#x", id, tos, sp, tt.id, tt.tos, tt.sp)
				}
			}
		})
	}
	// The counters move once deliver has returned.
	waitFor(t, "the counters", func() bool { return la.Stats().RxPackets == 2 && lb.Stats().RxPackets == 2 })
	for _, l := range []*Link{la, lb} {
		if s := l.Stats(); s.TxPackets != 2 || s.RxPackets != 2 || s.RxDropped != 0 || s.TxErrors != 0 || s.RxErrors != 0 {
			t.Errorf("link %s: stats %+v, want 2 packets each way and no drops or errors", l.Name(), s)
		}
	}
	// The port-holding sockets kept the kernel from answering any of
	// these with a port-unreachable.
	for _, s := range []*side{&n.a, &n.b} {
		if u := snmp(t, s.ns, "Icmp:", "OutDestUnreachs") + snmp(t, s.ns, "Icmp6:", "Icmp6OutDestUnreachs"); u != 0 {
			t.Errorf("%s sent %d ICMP destination-unreachable messages", s.ns, u)
		}
	}
}

func TestLinkDeliversOnlyItsAddressesAndPort(t *testing.T) {
	n, la, lb, _, cb := pair(t)
	// A second link in b's namespace, on lo: its raw sockets see a's
	// packets to b too, and must not deliver them.
	llo := openIn(t, n.b.ns, Config{Name: "lo", Netdev: "lo"})
	clo := serve(t, llo)

	other := testFrame4(n.a.v4, n.b.v4, 1, 0, 0xC000, DefaultPort+1, []byte("other port"))
	ours := testFrame4(n.a.v4, n.b.v4, 2, 0, 0xC000, DefaultPort, []byte("ours"))
	send(t, la, other, ours)
	if got := cb.next(t); !bytes.Equal(got, ours) {
		t.Fatalf("b got %x, want the frame to its port %x", got, ours)
	}
	cb.none(t)
	waitFor(t, "the lo link to see the frame", func() bool { return llo.Stats().RxNotOurs > 0 })
	if s := llo.Stats(); s.RxPackets != 0 || s.RxNotOurs != 1 {
		t.Errorf("lo link stats %+v: want 0 delivered, 1 not ours", s)
	}
	clo.none(t)
	waitFor(t, "b's counters", func() bool { return lb.Stats().RxPackets == 1 })
	if s := lb.Stats(); s.RxNotOurs != 0 || s.RxPackets != 1 {
		t.Errorf("b stats %+v: want 1 delivered, none not ours (the BPF filter drops the other port)", s)
	}

	// And the lo link works on its own addresses.
	send(t, llo, testFrame4(netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.1"), 3, 0, 0xC000, DefaultPort, []byte("self")))
	if got := clo.next(t); string(got[20+8+12:len(got)-4]) != "self" {
		t.Fatalf("lo link got %x", got)
	}
	send(t, llo, testFrame6(netip.IPv6Loopback(), netip.IPv6Loopback(), 0, 0, 0xC000, DefaultPort, []byte("self")))
	if got := clo.next(t); string(got[40+8+12:len(got)-4]) != "self" || !icrcOK(got) {
		t.Fatalf("lo link got %x", got)
	}
}

func TestLinkHoldsThePort(t *testing.T) {
	n := newTestNet(t)
	l := openIn(t, n.b.ns, Config{Name: "b", Netdev: n.b.dev})
	ifi := ifindex(t, n.b.ns, n.b.dev)
	for _, a := range []netip.Addr{n.b.v4, n.b.v6, n.b.ll} {
		if err := bindUDP(n.b.ns, a, ifi, DefaultPort); !errors.Is(err, unix.EADDRINUSE) {
			t.Errorf("binding %v:%d next to the link: %v, want address in use", a, DefaultPort, err)
		}
	}
	_, err := tryOpenIn(n.b.ns, Config{Name: "again", Netdev: n.b.dev})
	var pe *PortBusyError
	if !errors.Is(err, ErrPortBusy) || !errors.As(err, &pe) || pe.Port != DefaultPort || !strings.Contains(err.Error(), "rdma_rxe") {
		t.Errorf("second link on %s: %v, want a *PortBusyError naming rdma_rxe", n.b.dev, err)
	}
	// Another port is another matter.
	l2 := openIn(t, n.b.ns, Config{Name: "other", Netdev: n.b.dev, Port: DefaultPort + 1})
	if l2.Port() != DefaultPort+1 || l.Port() != DefaultPort {
		t.Errorf("ports %d and %d", l.Port(), l2.Port())
	}
}

func TestLinkFollowsAddresses(t *testing.T) {
	n, la, _, _, _ := pair(t)
	extra := n.a.v4.Next().Next().Next() // .4
	has := func(a netip.Addr) bool {
		for _, g := range la.GIDs() {
			if g == a.As16() {
				return true
			}
		}
		return false
	}
	waitFor(t, "GIDs of a new interface", func() bool { return has(n.a.v4) && has(n.a.v6) && has(n.a.ll) })
	if g := la.GIDs(); g[0] != n.a.ll.As16() || len(g) != 3 {
		t.Errorf("GIDs %v: want the EUI-64 link-local first, once, and two more", gidStrings(g))
	}
	if m := la.ActiveMTU(); m != ActiveMTUFor(1500) {
		t.Errorf("active MTU %v, want %v", m, ActiveMTUFor(1500))
	}
	if s := la.State(); !s.Active || !s.Netdev || s.Problem != "" {
		t.Errorf("state %+v, want active", s)
	}

	ip(t, "-n", n.a.ns, "addr", "add", extra.String()+"/24", "dev", n.a.dev)
	waitFor(t, "the added address's GID", func() bool { return has(extra) })
	waitFor(t, "the added address's port to be held", func() bool {
		return bindUDP(n.a.ns, extra, 0, DefaultPort) != nil
	})
	ip(t, "-n", n.a.ns, "addr", "del", extra.String()+"/24", "dev", n.a.dev)
	waitFor(t, "the removed address's GID to go", func() bool { return !has(extra) })
	waitFor(t, "the removed address's port to be free", func() bool {
		return bindUDP(n.a.ns, extra, 0, DefaultPort) == nil
	})

	ip(t, "-n", n.a.ns, "link", "set", n.a.dev, "mtu", "9000")
	waitFor(t, "a new MTU", func() bool { return la.ActiveMTU() == ActiveMTUFor(9000) })

	ip(t, "-n", n.a.ns, "link", "set", n.a.dev, "down")
	waitFor(t, "the link to go down", func() bool { return !la.State().Active })
	ip(t, "-n", n.a.ns, "link", "set", n.a.dev, "up")
	waitFor(t, "the link to come up", func() bool { return la.State().Active })

	ip(t, "-n", n.a.ns, "link", "del", n.a.dev) // both ends go
	waitFor(t, "the link to lose its interface", func() bool { return !la.State().Netdev })
	if g := la.GIDs(); len(g) != 0 {
		t.Errorf("GIDs %v after the interface went, want none", gidStrings(g))
	}
	if s := la.State(); s.Active || !strings.Contains(s.Problem, n.a.dev) {
		t.Errorf("state %+v, want DOWN saying %s is gone", s, n.a.dev)
	}
	if _, err := la.WriteBatch([][]byte{testFrame4(n.a.v4, n.b.v4, 1, 0, 1, DefaultPort, nil)}); !errors.Is(err, ErrDown) {
		t.Errorf("WriteBatch without an interface: %v, want ErrDown", err)
	}
	if m := la.ActiveMTU(); m != ActiveMTUFor(9000) {
		t.Errorf("active MTU %v after the interface went, want the last one, %v", m, ActiveMTUFor(9000))
	}
}

func TestOpenWaitsForAMissingNetdev(t *testing.T) {
	n := newTestNet(t)
	dev := n.a.dev + "x"
	_, err := tryOpenIn(n.a.ns, Config{Name: "x", Netdev: dev})
	var ne *NetdevError
	if !errors.Is(err, ErrNoNetdev) || !errors.As(err, &ne) || !strings.Contains(err.Error(), n.a.dev) {
		t.Fatalf("Open on a missing netdev: %v, want a *NetdevError listing %s", err, n.a.dev)
	}
	l := openIn(t, n.a.ns, Config{Name: "x", Netdev: dev, WaitNetdev: true})
	if s := l.State(); s.Active || s.Netdev || len(l.GIDs()) != 0 {
		t.Fatalf("link on a missing netdev: state %+v, GIDs %v", s, gidStrings(l.GIDs()))
	}
	if l.ActiveMTU() != 0x3 {
		t.Errorf("active MTU %v before the interface ever existed, want 1024", l.ActiveMTU())
	}
	ip(t, "-n", n.a.ns, "link", "add", dev, "address", "02:00:00:00:00:aa", "type", "veth", "peer", "name", dev+"p")
	ip(t, "-n", n.a.ns, "link", "set", dev+"p", "up")
	ip(t, "-n", n.a.ns, "link", "set", dev, "up")
	waitFor(t, "the interface to appear", func() bool { return l.State().Active })
	if g := l.GIDs(); len(g) == 0 || g[0] != linkLocalGID(net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}) {
		t.Errorf("GIDs %v", gidStrings(g))
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Name: "x"}, {Name: "x", Netdev: "lo", DSCP: 64}} {
		if _, err := Open(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Open(%+v): %v, want ErrConfig", cfg, err)
		}
	}
}

func TestCloseEndsServe(t *testing.T) {
	n := newTestNet(t)
	l := openIn(t, n.a.ns, Config{Name: "a", Netdev: n.a.dev})
	done := make(chan error, 1)
	go func() { done <- l.Serve(func([]byte) {}) }()
	time.Sleep(50 * time.Millisecond) // let Serve block in the poller
	if err := l.Serve(func([]byte) {}); !errors.Is(err, ErrServing) {
		t.Errorf("a second Serve: %v, want ErrServing", err)
	}
	start := time.Now()
	l.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v after Close, want nil", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Serve took %v to return after Close", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still running 5 s after Close")
	}
	if err := l.Serve(func([]byte) {}); err != nil {
		t.Errorf("Serve after Close: %v, want nil at once", err)
	}
	if _, err := l.WriteBatch([][]byte{testFrame4(n.a.v4, n.b.v4, 1, 0, 1, DefaultPort, nil)}); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteBatch after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestWriteBatchStopsAtABadFrame(t *testing.T) {
	n, la, _, _, cb := pair(t)
	good := testFrame4(n.a.v4, n.b.v4, 1, 0, 0xC000, DefaultPort, []byte("good"))
	noID := testFrame4(n.a.v4, n.b.v4, 0, 0, 0xC000, DefaultPort, []byte("no ID"))
	sent, err := la.WriteBatch([][]byte{good, noID, good})
	var fe *FrameError
	if sent != 1 || !errors.Is(err, ErrBadFrame) || !errors.As(err, &fe) || fe.Index != 1 {
		t.Fatalf("WriteBatch(good, ID 0, good) = %d, %v; want 1 and a *FrameError for frame 1", sent, err)
	}
	if got := cb.next(t); !bytes.Equal(got, good) {
		t.Errorf("b got %x", got)
	}
	// A frame larger than the interface's MTU is the kernel's to refuse.
	big := testFrame4(n.a.v4, n.b.v4, 2, 0, 0xC000, DefaultPort, make([]byte, 2000))
	if sent, err := la.WriteBatch([][]byte{good, big}); sent != 1 || err == nil {
		t.Errorf("WriteBatch(good, too big) = %d, %v; want 1 and EMSGSIZE", sent, err)
	}
	if s := la.Stats(); s.TxErrors != 1 {
		t.Errorf("TxErrors %d, want 1", s.TxErrors)
	}
}

func TestWriteBatchMixesFamiliesAndLongBatches(t *testing.T) {
	n, la, _, _, cb := pair(t)
	var frames [][]byte
	for i := 0; i < 3*batchSize+7; i++ {
		p := []byte(strconv.Itoa(i) + " ------")[:6]
		if i/10%2 == 0 {
			frames = append(frames, testFrame4(n.a.v4, n.b.v4, uint16(i+1), 0, 0xC000, DefaultPort, p))
		} else {
			frames = append(frames, testFrame6(n.a.v6, n.b.v6, 0, 0, 0xC000, DefaultPort, p))
		}
	}
	send(t, la, frames...)
	want := map[string]bool{}
	for _, f := range frames {
		want[string(f)] = true
	}
	for range frames {
		f := cb.next(t)
		if !want[string(f)] {
			t.Fatalf("b got a frame that was not sent, or twice: %x", f)
		}
		delete(want, string(f))
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ifindex(t testing.TB, ns, dev string) int {
	t.Helper()
	var idx int
	if err := inNS(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err == nil {
			idx = ifi.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return idx
}

// snmp reads one counter of /proc/net/snmp or snmp6 in namespace ns.
func snmp(t testing.TB, ns, table, name string) int {
	t.Helper()
	var v int
	var mu sync.Mutex
	err := inNS(ns, func() error {
		file := "/proc/thread-self/net/snmp"
		if table == "Icmp6:" {
			file += "6"
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			f := strings.Fields(l)
			if table == "Icmp6:" && len(f) == 2 && f[0] == name {
				mu.Lock()
				v, _ = strconv.Atoi(f[1])
				mu.Unlock()
				return nil
			}
			if len(f) > 0 && f[0] == table && i+1 < len(lines) {
				vals := strings.Fields(lines[i+1])
				for j := range f {
					if f[j] == name && j < len(vals) {
						mu.Lock()
						v, _ = strconv.Atoi(vals[j])
						mu.Unlock()
						return nil
					}
				}
			}
		}
		return errors.New("no counter " + table + name)
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The engine's receiver is single-threaded: with both families arriving at
// once, and a slow deliver, the two readers must still take turns.
func TestServeDeliversOneAtATime(t *testing.T) {
	n := newTestNet(t)
	la := openIn(t, n.a.ns, Config{Name: "a", Netdev: n.a.dev})
	lb := openIn(t, n.b.ns, Config{Name: "b", Netdev: n.b.dev})
	var busy, delivered atomic.Int32
	var overlap atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- lb.Serve(func([]byte) {
			if busy.Add(1) != 1 {
				overlap.Store(true)
			}
			time.Sleep(20 * time.Microsecond)
			busy.Add(-1)
			delivered.Add(1)
		})
	}()
	defer func() { lb.Close(); <-done }()
	var frames [][]byte
	for i := 0; i < 200; i++ {
		frames = append(frames, testFrame4(n.a.v4, n.b.v4, uint16(i+1), 0, 0xC000, DefaultPort, nil),
			testFrame6(n.a.v6, n.b.v6, 0, 0, 0xC000, DefaultPort, nil))
	}
	send(t, la, frames[:2]...) // resolve the neighbours first
	waitFor(t, "the first two frames", func() bool { return delivered.Load() == 2 })
	for i := 0; i < 5 && !overlap.Load(); i++ {
		send(t, la, frames...)
	}
	waitFor(t, "every frame", func() bool { return delivered.Load() >= int32(2+len(frames)) })
	if overlap.Load() {
		t.Fatal("deliver was called by two goroutines at once")
	}
}

// TestGroupsFollowTheInterface: a multicast group the link joined is in
// its interface's multicast list (what makes the kernel send the IGMP
// report, docs/design/multicast.md); when the interface is deleted and
// made again under the same name, the link joins the group again on the
// new one, and a group joined while the interface was gone is joined
// when it comes back. A group left is in neither list.
func TestGroupsFollowTheInterface(t *testing.T) {
	n, la, _, _, _ := pair(t)
	inList := func(g string) bool {
		out, err := exec.Command("ip", "-n", n.a.ns, "maddr", "show", "dev", n.a.dev).CombinedOutput()
		return err == nil && strings.Contains(string(out), " "+g+"\n")
	}
	waitFor(t, "the link to be up", func() bool { return la.State().Active })
	for _, g := range []string{"239.1.2.3", "239.1.2.9"} {
		if err := la.JoinGroup(netip.MustParseAddr(g)); err != nil {
			t.Fatal(err)
		}
	}
	if err := la.LeaveGroup(netip.MustParseAddr("239.1.2.9")); err != nil {
		t.Fatal(err)
	}
	if !inList("239.1.2.3") || inList("239.1.2.9") {
		t.Fatalf("before: 239.1.2.3 in %s's list %v (want true), 239.1.2.9 %v (want false)", n.a.dev, inList("239.1.2.3"), inList("239.1.2.9"))
	}
	ip(t, "-n", n.a.ns, "link", "del", n.a.dev) // both ends go
	waitFor(t, "the link to lose its interface", func() bool { return !la.State().Netdev })
	if err := la.JoinGroup(netip.MustParseAddr("239.1.2.4")); err == nil {
		t.Error("joining while the interface is gone: no error, want one saying it is joined when it comes back")
	}
	ip(t, "-n", n.a.ns, "link", "add", n.a.dev, "address", n.a.mac.String(), "type", "veth", "peer", "name", n.a.dev+"p")
	ip(t, "-n", n.a.ns, "addr", "add", n.a.v4.String()+"/24", "dev", n.a.dev)
	ip(t, "-n", n.a.ns, "link", "set", n.a.dev+"p", "up")
	ip(t, "-n", n.a.ns, "link", "set", n.a.dev, "up")
	waitFor(t, "the interface to come back", func() bool { return la.State().Active })
	waitFor(t, "239.1.2.3 and 239.1.2.4 in the new interface's list", func() bool {
		return inList("239.1.2.3") && inList("239.1.2.4")
	})
	if inList("239.1.2.9") {
		t.Error("239.1.2.9, left, is in the new interface's list")
	}
}
