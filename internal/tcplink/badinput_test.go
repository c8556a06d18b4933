package tcplink

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func u32(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// rawHello is a hello with its fields as given.
func rawHello(version, flags byte, n uint16, gids int) []byte {
	b := append([]byte(helloMagic), version, flags)
	b = binary.BigEndian.AppendUint16(b, n)
	b = append(b, make([]byte, 24)...)
	for i := range gids {
		g := netip.AddrFrom4([4]byte{10, 9, 9, byte(i + 1)}).As16()
		b = append(b, g[:]...)
	}
	return b
}

// Bad input from a connection — in the hello or after it — closes that
// connection with a logged reason that says what was wrong, and is counted;
// the link keeps serving its other peer.
func TestBadInput(t *testing.T) {
	frame := testFrame(addrC, addrA, 1, []byte("payload"))
	v6 := testFrame(netip.MustParseAddr("fd00::c"), netip.MustParseAddr("fd00::a"), 1, []byte("payload"))
	hs := func(s Stats) uint64 { return s.HandshakeErrors }
	proto := func(s Stats) uint64 { return s.ProtocolErrors }
	tests := []struct {
		name    string
		hello   bool   // send a good hello first
		data    []byte // then this
		hangUp  bool   // then close our side
		want    error
		counter func(Stats) uint64
		says    string // the logged error says this
	}{
		// Bytes in place of a hello.
		{"garbage", false, []byte("hello, is this the TCP channel? it is not!"), false, ErrProtocol, hs, "not a vrdma TCP-channel hello"},
		{"TLS client hello", false, cat([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}, make([]byte, 40)), false, ErrProtocol, hs, "configure TLS on both ends"},
		{"HTTP", false, []byte("GET / HTTP/1.1\r\nHost: example\r\nAccept: */*\r\n\r\n"), false, ErrProtocol, hs, "HTTP"},
		{"wrong version", false, rawHello(2, 0, 1, 1), false, ErrVersion, hs, "version 2"},
		{"version 0", false, rawHello(0, 0, 1, 1), false, ErrVersion, hs, "version 0"},
		{"flags", false, rawHello(1, 0x80, 1, 1), false, ErrProtocol, hs, "flags"},
		{"no GIDs", false, rawHello(1, 0, 0, 0), false, ErrProtocol, hs, "0 GIDs"},
		{"too many GIDs", false, rawHello(1, 0, 65, 65), false, ErrProtocol, hs, "65 GIDs"},
		{"hello cut short", false, rawHello(1, 0, 1, 1)[:20], true, ErrProtocol, hs, "before the hello was complete"},
		{"GIDs cut short", false, rawHello(1, 0, 2, 1), true, ErrProtocol, hs, "before the hello was complete"},
		{"bad magic cut short", false, []byte("xyz"), true, ErrProtocol, hs, "before the hello was complete"},
		// Bad frames after a good hello.
		{"oversized length", true, u32(0xffffffff), false, ErrProtocol, proto, "above the largest"},
		{"length one above the largest", true, u32(MaxFrame + 1), false, ErrProtocol, proto, "above the largest"},
		{"not an IP packet", true, cat(u32(8), []byte("\x00garbage")), false, ErrProtocol, proto, "not an IPv4 or IPv6 packet"},
		{"truncated IPv4 frame", true, cat(u32(uint32(len(frame)-5)), frame[:len(frame)-5]), false, ErrProtocol, proto, "IPv4 total length"},
		{"truncated IPv6 frame", true, cat(u32(uint32(len(v6)-1)), v6[:len(v6)-1]), false, ErrProtocol, proto, "IPv6 payload length"},
		{"IPv4 header cut short", true, cat(u32(10), frame[:10]), false, ErrProtocol, proto, "IPv4 header cut short"},
		{"closed mid-frame", true, cat(u32(uint32(len(frame))), frame[:30]), true, ErrProtocol, proto, "30 of its 52 bytes"},
		{"closed mid-length", true, []byte{0, 0}, true, ErrProtocol, proto, "2 of the 4 length bytes"},
		{"good frame, then closed mid-length", true, cat(u32(uint32(len(frame))), frame, []byte{0}), true, ErrProtocol, proto, "1 of the 4 length bytes"},
		{"good frame, then closed mid-frame", true, cat(u32(uint32(len(frame))), frame, u32(uint32(len(frame))), frame[:1]), true, ErrProtocol, proto, "1 of its 52 bytes"},
	}
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, nil)
	b := openNode(t, &eps, addrB, 0, nil)
	connectPair(t, b, a)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.logs.mu.Lock()
			a.logs.recs = nil
			a.logs.mu.Unlock()
			a.refuseLog.Reset() // this test reads every refusal's log line
			before, delivered := tt.counter(a.Stats()), a.sink.count()
			var c net.Conn
			if tt.hello {
				c = rawPeer(t, a, randomID(), addrC)
			} else {
				c = dialRaw(t, a)
			}
			if _, err := c.Write(tt.data); err != nil {
				t.Fatal(err)
			}
			if tt.hangUp {
				_ = c.(*net.TCPConn).CloseWrite()
			}
			waitFor(t, "the error to be counted", func() bool { return tt.counter(a.Stats()) == before+1 })
			expectClosed(t, c)
			// Only whole good frames reach the engine.
			good := strings.Count(string(tt.data), string(frame))
			if got := a.sink.count() - delivered; got != good {
				t.Fatalf("%d frames delivered, want %d", got, good)
			}
			err := a.logs.find(tt.want)
			if err == nil {
				t.Fatalf("no logged error matches %v", tt.want)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("logged %q, which does not say %q", err, tt.says)
			}
			t.Log(err)
			// The link still serves B.
			checkFlow(t, a, b, 3)
		})
	}
}

// The link's own listener as a peer (a Peers entry pointing back at this
// host) is refused, and so is a connection that says nothing.
func TestHandshakeRefusals(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, func(c *Config) { c.HandshakeTimeout = 200 * time.Millisecond })
	t.Run("self", func(t *testing.T) {
		eps.set(addrB, a.ListenAddr().String())
		send(t, a.Link, testFrame(addrA, addrB, 1, nil))
		waitFor(t, "the refusal", func() bool { return a.logs.find(ErrSelf) != nil })
		t.Log(a.logs.find(ErrSelf))
		waitFor(t, "the dropped frame", func() bool { return a.Stats().DroppedNoPeer == 1 })
	})
	t.Run("silent", func(t *testing.T) {
		before := a.Stats().HandshakeErrors
		c := dialRaw(t, a)
		waitFor(t, "the handshake timeout", func() bool { return a.Stats().HandshakeErrors > before })
		expectClosed(t, c)
		err := a.logs.find(ErrProtocol)
		if err == nil || !strings.Contains(err.Error(), "no complete hello within") {
			t.Fatalf("logged %v", err)
		}
	})
}

// Connections in their handshake are bounded per source: the source's
// next is refused at once, and counted; a slot freed lets it in again.
func TestHandshakesPerSource(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, func(c *Config) { c.HandshakeTimeout = time.Minute; c.Handshakes.PerSource = 3 })
	src := netip.MustParseAddr("127.0.0.44")
	var conns []net.Conn
	for range 3 {
		c, err := dialFrom(t, a, src)
		if err != nil {
			t.Fatal(err)
		}
		readHelloOf(t, c, a) // it holds a slot once its hello has come
		conns = append(conns, c)
	}
	extra, err := dialFrom(t, a, src)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refusal", func() bool { return a.Stats().HandshakesRefused == 1 })
	expectClosed(t, extra)
	// Another source is not held up.
	other, err := dialFrom(t, a, netip.MustParseAddr("127.0.0.45"))
	if err != nil {
		t.Fatal(err)
	}
	readHelloOf(t, other, a)
	// The freed slot comes when conns[0]'s handshake fails; then the
	// source gets in again.
	conns[0].Close()
	waitFor(t, "the freed slot", func() bool { return a.Stats().HandshakeErrors == 1 })
	again, err := dialFrom(t, a, src)
	if err != nil {
		t.Fatal(err)
	}
	readHelloOf(t, again, a)
	if s := a.Stats(); s.HandshakesRefused != 1 || s.HandshakesCut != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// When every handshake slot is taken, the oldest handshake is cut to let a
// new connection in.
func TestHandshakesCutOldest(t *testing.T) {
	var eps endpoints
	a := openNode(t, &eps, addrA, 0, func(c *Config) { c.HandshakeTimeout = time.Minute; c.Handshakes.Total = 4 })
	var conns []net.Conn
	for i := range 4 {
		c, err := dialFrom(t, a, netip.AddrFrom4([4]byte{127, 0, 3, byte(i + 1)}))
		if err != nil {
			t.Fatal(err)
		}
		readHelloOf(t, c, a)
		conns = append(conns, c)
	}
	fresh, err := dialFrom(t, a, netip.MustParseAddr("127.0.3.9"))
	if err != nil {
		t.Fatal(err)
	}
	readHelloOf(t, fresh, a)
	expectClosed(t, conns[0])
	if s := a.Stats(); s.HandshakesCut != 1 || s.HandshakeErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The others are still in their handshake: a hello lets them in.
	h := hello{id: randomID(), nonce: 1, gids: [][16]byte{netip.MustParseAddr("127.0.3.2").As16()}}
	if _, err := conns[1].Write(appendHello(nil, &h)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the connection", func() bool { return a.Stats().Connects == 1 })
}
