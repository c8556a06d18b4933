package tcplink

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

func TestOpenConfig(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.1")
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"fine", Config{Name: "tcp0", Addrs: []netip.Addr{a}}, true},
		{"no name", Config{Addrs: []netip.Addr{a}}, false},
		{"no addresses", Config{Name: "tcp0"}, false},
		{"unspecified address", Config{Name: "tcp0", Addrs: []netip.Addr{netip.IPv4Unspecified()}}, false},
		{"zero address", Config{Name: "tcp0", Addrs: []netip.Addr{{}}}, false},
		{"zone", Config{Name: "tcp0", Addrs: []netip.Addr{netip.MustParseAddr("fe80::1%lo")}}, false},
		{"short MAC", Config{Name: "tcp0", Addrs: []netip.Addr{a}, MAC: net.HardwareAddr{1, 2, 3}}, false},
		{"bad MTU", Config{Name: "tcp0", Addrs: []netip.Addr{a}, MTU: 9}, false},
		{"tiny queue", Config{Name: "tcp0", Addrs: []netip.Addr{a}, QueueBytes: 100}, false},
		{"negative keepalive", Config{Name: "tcp0", Addrs: []netip.Addr{a}, KeepAlive: -1}, false},
		{"too many addresses", Config{Name: "tcp0", Addrs: manyAddrs(maxHelloAddrs + 1)}, false},
		{"bad listen address", Config{Name: "tcp0", Addrs: []netip.Addr{a}, Listen: "127.0.0.1:99999"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Listen == "" {
				tt.cfg.Listen = "127.0.0.1:0"
			}
			l, err := Open(tt.cfg)
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				l.Close()
				return
			}
			if err == nil {
				l.Close()
				t.Fatal("Open accepted the config")
			}
			t.Logf("%v", err)
			if tt.name != "bad listen address" && !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not match ErrConfig", err)
			}
		})
	}
}

func manyAddrs(n int) []netip.Addr {
	var as []netip.Addr
	for i := range n {
		as = append(as, netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}))
	}
	return as
}

func TestGIDsAndMTU(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x47, 0x91, 0x01}
	tests := []struct {
		name  string
		mac   net.HardwareAddr
		addrs []string
		mtu   abi.MTU
		want  []string
		wantM abi.MTU
	}{
		{"no MAC", nil, []string{"10.0.0.1", "fd00::1"}, 0, []string{"::ffff:10.0.0.1", "fd00::1"}, abi.MTU4096},
		{"MAC first", mac, []string{"10.0.0.1"}, abi.MTU1024, []string{"fe80::5054:ff:fe47:9101", "::ffff:10.0.0.1"}, abi.MTU1024},
		{"mapped and repeated", nil, []string{"::ffff:10.0.0.1", "10.0.0.1"}, 0, []string{"::ffff:10.0.0.1"}, abi.MTU4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var addrs []netip.Addr
			for _, a := range tt.addrs {
				addrs = append(addrs, netip.MustParseAddr(a))
			}
			l, err := Open(Config{Name: "tcp0", Addrs: addrs, MAC: tt.mac, MTU: tt.mtu, Listen: "127.0.0.1:0"})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var got []string
			for _, g := range l.GIDs() {
				got = append(got, netip.AddrFrom16(g).String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("GIDs %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("GIDs %v, want %v", got, tt.want)
				}
			}
			if m := l.ActiveMTU(); m != tt.wantM {
				t.Fatalf("ActiveMTU %v, want %v", m, tt.wantM)
			}
		})
	}
}

// Two links exchange many frames both ways at once; every frame arrives
// once, in order, byte for byte, with its ICRC intact.
func TestExchange(t *testing.T) {
	v6A, v6B := netip.MustParseAddr("fd00::a"), netip.MustParseAddr("fd00::b")
	tests := []struct {
		name   string
		v6     bool
		frames int
		batch  int
		sizes  []int // payload sizes, in turn
	}{
		{"IPv4 one frame", false, 1, 1, []int{16}},
		{"IPv4 many small", false, 5000, 32, []int{0, 4, 60}},
		{"IPv4 mixed sizes", false, 2000, 7, []int{1, 1024, 4096, 333, 2048}},
		{"IPv6", true, 2000, 16, []int{100, 4096}},
		{"IPv4 largest frame", false, 200, 3, []int{MaxFrame - 20 - 8 - 12 - 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eps endpoints
			mod := func(c *Config) {
				if tt.v6 {
					if c.Addrs[0] == addrA {
						c.Addrs = append(c.Addrs, v6A)
					} else {
						c.Addrs = append(c.Addrs, v6B)
					}
				}
			}
			a := openNode(t, &eps, addrA, 0, mod)
			b := openNode(t, &eps, addrB, 0, mod)
			// Connect first: frames sent while both ends dial at once may
			// come in on both connections, out of order. (The IPv6
			// addresses do not resolve: they are learnt from the hellos.)
			connectPair(t, a, b)
			src, dst := addrA, addrB
			if tt.v6 {
				src, dst = v6A, v6B
			}
			var wantAB, wantBA [][]byte
			for i := range tt.frames {
				size := tt.sizes[i%len(tt.sizes)]
				wantAB = append(wantAB, testFrame(src, dst, uint32(i), bytes.Repeat([]byte{byte(i)}, size)))
				wantBA = append(wantBA, testFrame(dst, src, uint32(i), bytes.Repeat([]byte{byte(i + 1)}, size)))
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				writeAll(t, b.Link, wantBA, tt.batch)
			}()
			writeAll(t, a.Link, wantAB, tt.batch)
			<-done
			waitFor(t, "all frames", func() bool { return a.sink.count() == tt.frames && b.sink.count() == tt.frames })
			checkFrames(t, "A to B", b.sink.got(), wantAB)
			checkFrames(t, "B to A", a.sink.got(), wantBA)
			sa, sb := a.Stats(), b.Stats()
			if sa.FramesOut != uint64(tt.frames)+1 || sb.FramesIn != uint64(tt.frames)+1 {
				t.Fatalf("counters: A sent %d, B received %d, want %d", sa.FramesOut, sb.FramesIn, tt.frames)
			}
			if sa.Connects+sb.Connects != 2 || sa.ProtocolErrors+sb.ProtocolErrors+sa.HandshakeErrors+sb.HandshakeErrors != 0 {
				t.Fatalf("want one connection, seen from both ends, and no errors: A %+v, B %+v", sa, sb)
			}
			if ps := a.Peers(); len(ps) != 1 || ps[0].State != "up" {
				t.Fatalf("A's peers: %+v", ps)
			}
		})
	}
}

// connectPair connects a to b with one frame, which it takes out of b's
// sink.
func connectPair(t testing.TB, a, b *node) {
	t.Helper()
	send(t, a.Link, testFrame(a.cfg.Addrs[0], b.cfg.Addrs[0], 0, nil))
	waitFor(t, "the first frame", func() bool { return b.sink.count() == 1 })
	b.sink.mu.Lock()
	b.sink.frames, b.sink.n = nil, 0
	b.sink.mu.Unlock()
}

// writeAll sends frames in batches, each once the send queues are less
// than half full, so that none is dropped.
func writeAll(t testing.TB, l *Link, frames [][]byte, batch int) {
	for i := 0; i < len(frames); {
		k := min(batch, len(frames)-i)
		for l.queued() > l.cfg.QueueBytes/2 {
			time.Sleep(50 * time.Microsecond)
		}
		n, err := l.WriteBatch(frames[i : i+k])
		if err != nil {
			t.Error(err)
			return
		}
		if n < k {
			t.Errorf("WriteBatch queued %d of %d frames (%+v)", n, k, l.Stats())
			return
		}
		i += k
	}
}

func checkFrames(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames arrived, want %d", what, len(got), len(want))
	}
	var p wire.Packet
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: frame %d differs: got %d bytes % x..., want %d bytes % x...", what, i, len(got[i]), got[i][:min(48, len(got[i]))], len(want[i]), want[i][:min(48, len(want[i]))])
		}
		if err := wire.Decode(got[i], &p); err != nil {
			t.Fatalf("%s: frame %d does not decode: %v", what, i, err)
		}
		if err := wire.VerifyICRC(got[i]); err != nil {
			t.Fatalf("%s: frame %d: %v", what, i, err)
		}
	}
}

// Frames to an address that no peer answers for are dropped, counted and
// logged once with the reason; a malformed frame stops the batch.
func TestWriteBatchDrops(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, nil)
	nowhere := netip.MustParseAddr("192.0.2.9")
	n, err := a.WriteBatch([][]byte{testFrame(addrA, nowhere, 1, nil), testFrame(addrA, nowhere, 2, nil)})
	if err != nil || n != 0 {
		t.Fatalf("WriteBatch = %d, %v; want 0 queued, no error", n, err)
	}
	if s := a.Stats(); s.DroppedNoPeer != 2 {
		t.Fatalf("DroppedNoPeer = %d, want 2", s.DroppedNoPeer)
	}
	var ne *NoEndpointError
	if err := a.logs.find(ErrNoEndpoint); !errors.As(err, &ne) || ne.Dst != nowhere {
		t.Fatalf("logged %v, want a *NoEndpointError for %v", err, nowhere)
	}

	good := testFrame(addrA, nowhere, 3, nil)
	bad := []struct {
		name  string
		frame []byte
	}{
		{"empty", nil},
		{"not IP", []byte{0x10, 1, 2, 3}},
		{"IPv4 cut short", good[:12]},
		{"IPv4 length wrong", append(bytes.Clone(good), 0)},
		{"IPv6 cut short", append([]byte{0x60}, make([]byte, 20)...)},
		{"IPv6 length wrong", append([]byte{0x60, 0, 0, 0, 0, 9}, make([]byte, 40)...)},
		{"too long", append([]byte{0x45}, make([]byte, MaxFrame)...)},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			n, err := a.WriteBatch([][]byte{good, tt.frame, good})
			var fe *FrameError
			if !errors.As(err, &fe) || fe.Index != 1 || !errors.Is(err, ErrBadFrame) {
				t.Fatalf("WriteBatch = %d, %v; want a *FrameError for frame 1", n, err)
			}
			t.Log(err)
		})
	}
}

// Frames for an address the peer announced in its hello, which Peers does
// not resolve, go over the peer's connection.
func TestAnnouncedAddress(t *testing.T) {
	var eps endpoints
	extra := netip.MustParseAddr("198.51.100.2")
	a := openNode(t, &eps, addrA, 0, nil)
	b := openNode(t, &eps, addrB, 0, func(c *Config) { c.Addrs = append(c.Addrs, extra) })
	send(t, a.Link, testFrame(addrA, addrB, 1, nil))
	waitFor(t, "the connection", func() bool { return b.sink.count() == 1 })
	send(t, a.Link, testFrame(addrA, extra, 2, nil))
	waitFor(t, "the frame to the announced address", func() bool { return b.sink.count() == 2 })
	ps := a.Peers()
	if len(ps) != 1 || len(ps[0].Addrs) != 2 || ps[0].Addrs[1] != extra {
		t.Fatalf("A's peers %+v: want one, with both of B's addresses", ps)
	}
}

func TestServeAndClose(t *testing.T) {
	l, err := Open(Config{Name: "tcp0", Addrs: []netip.Addr{addrA}, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Serve(nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("Serve(nil) = %v", err)
	}
	done := make(chan error)
	go func() { done <- l.Serve(func([]byte) {}) }()
	waitFor(t, "Serve to start", func() bool { return l.serveRun.Load() })
	if err := l.Serve(func([]byte) {}); !errors.Is(err, ErrServing) {
		t.Fatalf("a second Serve = %v, want ErrServing", err)
	}
	l.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve returned %v after Close", err)
	}
	if _, err := l.WriteBatch([][]byte{testFrame(addrA, addrB, 1, nil)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("WriteBatch after Close = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("a second Close = %v", err)
	}
}

// awaitIdle waits until no peer's queue holds anything and no write is in
// progress, so that the next WriteBatch may write directly. It allocates
// nothing.
func (l *Link) awaitIdle() {
	for {
		busy := false
		l.mu.RLock()
		for _, p := range l.peers {
			p.mu.Lock()
			busy = busy || p.writing || len(p.pending) > 0
			p.mu.Unlock()
		}
		l.mu.RUnlock()
		if !busy {
			return
		}
		runtime.Gosched()
	}
}

// queued is the bytes waiting in all send queues.
func (l *Link) queued() int {
	n := 0
	for _, p := range l.Peers() {
		n += p.Queued
	}
	return n
}
