package tcplink

// Tests that play the attacker against a link on loopback: a third host
// that announces another's addresses or link ID, a flood of hellos with
// fresh link IDs, idle connections that hold the handshake slots. Each
// source address is a loopback address of its own (127.0.0.0/8 is all
// this host's), so the link sees the hosts apart as it would on a network.

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
)

// dialFrom connects to n from source address src.
func dialFrom(t testing.TB, n *node, src netip.Addr) (net.Conn, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: testTimeout}
	c, err := d.Dial("tcp", n.ListenAddr().String())
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// intruder is a hand-made peer at src: it says a hello with link ID id
// and addresses addrs, reads n's hello, then counts the frames (not the
// keepalives) n sends it until the connection ends.
type intruder struct {
	c      net.Conn
	frames atomic.Int64
	ended  chan struct{} // closed when the connection ends
}

func intrude(t *testing.T, n *node, src netip.Addr, id [16]byte, addrs ...netip.Addr) *intruder {
	t.Helper()
	c, err := dialFrom(t, n, src)
	if err != nil {
		t.Fatal(err)
	}
	h := hello{id: id, nonce: 7}
	for _, a := range addrs {
		h.gids = append(h.gids, a.As16())
	}
	if _, err := c.Write(appendHello(nil, &h)); err != nil {
		t.Fatal(err)
	}
	x := &intruder{c: c, ended: make(chan struct{})}
	go func() {
		defer close(x.ended)
		_ = c.SetReadDeadline(time.Now().Add(testTimeout))
		b := make([]byte, helloFixedLen+16*len(n.gids))
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		var hdr [4]byte
		buf := make([]byte, MaxFrame)
		for {
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				return
			}
			k := binary.BigEndian.Uint32(hdr[:])
			if k > MaxFrame {
				return
			}
			if _, err := io.ReadFull(c, buf[:k]); err != nil {
				return
			}
			if k > 0 {
				x.frames.Add(1)
			}
		}
	}()
	return x
}

// wasRefused waits until the link has closed the intruder's connection.
func (x *intruder) wasRefused(t *testing.T) {
	t.Helper()
	select {
	case <-x.ended:
	case <-time.After(testTimeout):
		t.Fatal("the link kept the intruder's connection")
	}
}

var attacker = netip.MustParseAddr("127.0.0.66")

// A third host that announces B's address, or B's link ID, while B is
// connected to A does not take B's place: A's traffic to B keeps reaching
// B, none reaches the third host, whose connection is refused.
func TestHijack(t *testing.T) {
	tests := []struct {
		name  string
		id    func(b *node) [16]byte
		addrs func(b *node) []netip.Addr
	}{
		{"B's address, a new link ID", func(*node) [16]byte { return randomID() }, func(*node) []netip.Addr { return []netip.Addr{addrB} }},
		{"B's address among its own", func(*node) [16]byte { return randomID() }, func(*node) []netip.Addr { return []netip.Addr{attacker, addrB} }},
		{"B's link ID and address", func(b *node) [16]byte { return b.id }, func(*node) []netip.Addr { return []netip.Addr{addrB} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eps endpoints
			a := openNode(t, &eps, addrA, 0, nil)
			b := openNode(t, &eps, addrB, 0, nil)
			connectPair(t, a, b)
			x := intrude(t, a, attacker, tt.id(b), tt.addrs(b)...)
			x.wasRefused(t)
			checkFlow(t, a, b, 100)
			if n := x.frames.Load(); n != 0 {
				t.Fatalf("the intruder got %d frames", n)
			}
			if ps := a.Peers(); len(ps) != 1 || ps[0].State != "up" {
				t.Fatalf("A's peers: %+v", ps)
			}
		})
	}
}

// A third host with B's link ID that announces only its own address is a
// peer of its own: it gets what is sent to it, B keeps getting B's.
func TestLinkIDIsNotIdentity(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, nil)
	b := openNode(t, &eps, addrB, 0, nil)
	connectPair(t, a, b)
	x := intrude(t, a, attacker, b.id, attacker)
	waitFor(t, "the intruder's connection", func() bool { return a.Stats().Connects == 2 })
	send(t, a.Link, testFrame(addrA, attacker, 1, nil))
	waitFor(t, "the frame to the intruder", func() bool { return x.frames.Load() == 1 })
	checkFlow(t, a, b, 50)
	if n := x.frames.Load(); n != 1 {
		t.Fatalf("the intruder got %d frames, want its one", n)
	}
}

// peerCount is how many peers the link knows.
func (l *Link) peerCount() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.peers)
}

// tableSizes is the size of each of the link's tables.
func (l *Link) tableSizes() (peers, addrs, endpoints int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.peers), len(l.byAddr), len(l.byEP)
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// A flood of hellos, each with a fresh link ID and fresh addresses, from a
// few hosts: the link keeps one peer per host while their connections
// last, and forgets them once they are gone and idle; goroutines and
// memory come back.
func TestHelloFlood(t *testing.T) {
	const (
		hellos  = 3000
		sources = 4
		workers = 8
	)
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, func(c *Config) { c.KeepAlive = 100 * time.Millisecond })
	goBefore, heapBefore := runtime.NumGoroutine(), heapInUse()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= hellos {
					return
				}
				src := netip.AddrFrom4([4]byte{127, 0, 1, byte(1 + i%sources)})
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: testTimeout}
				c, err := d.Dial("tcp", a.ListenAddr().String()) // closed below: the test keeps nothing of it
				if err != nil {
					t.Error(err)
					return
				}
				h := hello{id: randomID(), nonce: uint64(i)}
				for k := range 16 {
					h.gids = append(h.gids, netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), byte(k)}).As16())
				}
				_, _ = c.Write(appendHello(nil, &h))
				_ = c.SetReadDeadline(time.Now().Add(testTimeout))
				_, _ = io.ReadFull(c, make([]byte, helloFixedLen+16))
				c.Close()
			}
		}()
	}
	wg.Wait()
	peers, addrs, _ := a.tableSizes()
	goAfter, heapAfter := runtime.NumGoroutine(), heapInUse()
	t.Logf("after %d hellos from %d hosts: %d peers, %d addresses, goroutines %d -> %d, heap in use %.1f -> %.1f MB, stats %+v",
		hellos, sources, peers, addrs, goBefore, goAfter, float64(heapBefore)/1e6, float64(heapAfter)/1e6, a.Stats())
	if peers > sources || addrs > sources*16 {
		t.Fatalf("%d peers and %d addresses after the flood, want at most %d and %d", peers, addrs, sources, sources*16)
	}
	waitFor(t, "the idle peers to be forgotten", func() bool { p, ad, ep := a.tableSizes(); return p+ad+ep == 0 })
	checkGoroutines(t, goBefore)
	t.Logf("once forgotten: goroutines %d, heap in use %.1f MB", runtime.NumGoroutine(), float64(heapInUse())/1e6)
}

// A peer whose connection is gone, with nothing queued and no traffic, is
// forgotten after a few keepalive intervals: it leaves every table and
// its writer ends. One that cannot be reached is too.
func TestIdlePeerForgotten(t *testing.T) {
	var eps endpoints
	short := func(c *Config) { c.KeepAlive = 50 * time.Millisecond }
	a := openNode(t, &eps, addrA, 0, short)
	before := runtime.NumGoroutine()
	b := openNode(t, &eps, addrB, 0, short)
	connectPair(t, a, b)
	b.stop(t)
	waitFor(t, "A to forget B", func() bool { p, ad, ep := a.tableSizes(); return p+ad+ep == 0 })
	checkGoroutines(t, before)

	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	eps.set(addrC, ln.Addr().String())
	ln.Close()
	send(t, a.Link, testFrame(addrA, addrC, 1, nil))
	waitFor(t, "the failed dial", func() bool { return a.Stats().DialErrors == 1 })
	waitFor(t, "A to forget C", func() bool { p, ad, ep := a.tableSizes(); return p+ad+ep == 0 })
	checkGoroutines(t, before)
	// A frame for a forgotten peer makes it again.
	b2 := openNode(t, &eps, addrB, 0, short)
	connectPair(t, a, b2)
}

// Idle connections from many hosts fill every handshake slot and are
// opened again as soon as one is closed; a daemon still gets in.
func TestSlowloris(t *testing.T) {
	const (
		sources = 40
		perSrc  = 4
		maxConn = 100000 // the attacker's budget of connections: it must last until B is in
	)
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, func(c *Config) { c.HandshakeTimeout = time.Minute })
	b := openNode(t, &eps, addrB, 0, nil)
	stop := make(chan struct{})
	var opened atomic.Int64
	var wg sync.WaitGroup
	for s := range sources {
		src := netip.AddrFrom4([4]byte{127, 0, 2, byte(1 + s)})
		for range perSrc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for opened.Add(1) <= maxConn {
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
					c, err := d.Dial("tcp", a.ListenAddr().String())
					if err != nil {
						continue
					}
					done := make(chan struct{})
					go func() { _, _ = io.Copy(io.Discard, c); close(done) }()
					select { // hold it, say nothing, until the link closes it
					case <-done:
						c.Close()
					case <-stop:
						c.Close()
						return
					}
				}
			}()
		}
	}
	waitFor(t, "the slots to fill", func() bool { return opened.Load() >= sources*perSrc })
	time.Sleep(100 * time.Millisecond) // let the accepts catch up
	start := time.Now()
	waitFor(t, "B's frame to reach A", func() bool {
		_, _ = b.WriteBatch([][]byte{testFrame(addrB, addrA, 1, nil)})
		time.Sleep(time.Millisecond)
		return a.sink.count() > 0
	})
	took, used := time.Since(start), opened.Load()
	close(stop)
	wg.Wait()
	t.Logf("B got in after %v, with %d idle connections opened so far; A: %+v", took, used, a.Stats())
	if used >= maxConn {
		t.Fatalf("the attack was over before B got in: give the attacker more than %d connections", maxConn)
	}
}

// With an Authorizer that knows no such host, a flood of hellos creates no
// peer at all; every refusal is counted, and few of them logged.
func TestHelloFloodRefused(t *testing.T) {
	const hellos = 500
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, func(c *Config) {
		c.Authorize = func(p admit.Peer) (string, error) { return "", errors.New("no such host in the switch") }
	})
	src := netip.MustParseAddr("127.0.1.9")
	for i := range hellos {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: testTimeout}
		c, err := d.Dial("tcp", a.ListenAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		h := hello{id: randomID(), nonce: uint64(i), gids: [][16]byte{src.As16()}}
		_, _ = c.Write(appendHello(nil, &h))
		_ = c.SetReadDeadline(time.Now().Add(testTimeout))
		_, _ = io.Copy(io.Discard, c) // until the link closes it
		c.Close()
	}
	waitFor(t, "every refusal", func() bool { s := a.Stats(); return s.Unauthorized+s.HandshakesRefused == hellos })
	s := a.Stats()
	a.logs.mu.Lock()
	lines := len(a.logs.recs)
	a.logs.mu.Unlock()
	t.Logf("%d hellos: %d peers, %d log lines, %+v", hellos, a.peerCount(), lines, s)
	if a.peerCount() != 0 || s.Connects != 0 {
		t.Fatalf("%d peers, %d connects", a.peerCount(), s.Connects)
	}
	if lines > admit.DefaultLogBurst || s.LogsSuppressed == 0 {
		t.Fatalf("%d lines logged, %d suppressed: want at most %d", lines, s.LogsSuppressed, admit.DefaultLogBurst)
	}
}

// A peer delivers only frames from the addresses its hello announced (and
// Authorize accepted): a frame whose source is another host's address, or
// this host's own, is dropped and counted, and the peer's own frames
// still arrive.
func TestSpoofedSourceDropped(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, nil)
	b := openNode(t, &eps, addrB, 0, nil)
	connectPair(t, a, b)
	x := intrude(t, a, attacker, randomID(), attacker)
	before := a.sink.count()
	for i, src := range []netip.Addr{addrB, addrA, netip.MustParseAddr("10.9.9.9"), attacker} {
		f := testFrame(src, addrA, uint32(i+1), []byte("spoofed?"))
		if _, err := x.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the intruder's own frame", func() bool { return a.sink.count() > before })
	waitFor(t, "three spoofed frames counted", func() bool { return a.Stats().Spoofed == 3 })
	if got := a.sink.count() - before; got != 1 {
		t.Fatalf("A delivered %d of the intruder's frames, want only the one from its own address", got)
	}
	checkFlow(t, a, b, 10)
}
