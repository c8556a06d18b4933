package attack

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowloris holds idle connections to addrs from many source addresses of
// mallory's, opening a new one whenever one is closed, until stop: the
// attack that filled every handshake slot of the TCP channel (64 idle
// connections) and locked the legitimate daemons out.
type slowloris struct {
	opened atomic.Int64
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startSlowloris(t *testing.T, f *scene, sources int, perTarget int, targets ...string) *slowloris {
	t.Helper()
	var srcs []netip.Addr
	base := f.top.Subnet.Addr().As4()
	for i := 0; i < sources; i++ {
		a := base
		a[3] = byte(100 + i)
		src := netip.AddrFrom4(a)
		f.hm.Run(t, "ip", "addr", "add", src.String()+"/24", "dev", f.hm.Iface)
		srcs = append(srcs, src)
	}
	s := &slowloris{stop: make(chan struct{})}
	for _, target := range targets {
		for i := 0; i < perTarget; i++ {
			src := srcs[i%len(srcs)]
			s.wg.Add(1)
			go s.hold(f, src, target)
		}
	}
	t.Cleanup(s.end)
	// Let them all get in first, so the legitimate daemon finds the slots taken.
	eventually(t, 30*time.Second, "the idle connections are open", func() (bool, string) {
		n := s.opened.Load()
		return n >= int64(perTarget*len(targets)), fmt.Sprintf("%d open", n)
	})
	return s
}

// hold keeps one idle connection from src to target open, opening another
// when the target closes it.
func (s *slowloris) hold(f *scene, src netip.Addr, target string) {
	defer s.wg.Done()
	for {
		var c net.Conn
		_ = f.hm.Do(func() error {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: 2 * time.Second}
			var err error
			c, err = d.Dial("tcp", target)
			return err
		})
		if c != nil {
			s.opened.Add(1)
			go func() { <-s.stop; c.Close() }()
			_, _ = c.Read(make([]byte, 1)) // until the target closes it (or stop does)
			c.Close()
		}
		select {
		case <-s.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *slowloris) end() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.wg.Wait()
}

// TestSlowloris: mallory holds 200 idle connections from 20 addresses to
// host b's listener between daemons (the TCP channel's) and reopens
// whatever b closes. Host a still connects to b: its first WRITE to b goes
// through (a's TCP channel dials b's) and a CM connection from a to b (CM
// MADs inside the channel) is established. How long each took is logged.
func TestSlowloris(t *testing.T) {
	f := newScene(t, true)
	ctx := testCtx(t, 3*time.Minute)
	chanAddr := net.JoinHostPort(f.hb.IPv4.String(), channelPort)
	before := f.guard(t, f.b)
	s := startSlowloris(t, f, 20, 200, chanAddr)

	p := newPair(t, f)
	first := p.mustWrite(ctx)

	// The CM: b listens, a dials b's address.
	b := openSide(t, f.b, f.hb)
	a := openSide(t, f.a, f.ha)
	ln, err := b.dev.Listen(7000)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err == nil {
			_, err = req.Accept(ctx, b.qp, nil)
		}
		accepted <- err
	}()
	start := time.Now()
	conn, err := a.dev.Dial(ctx, a.qp, f.hb.IPv4, 7000, []byte("hello"))
	if err != nil {
		t.Fatalf("a's CM connection to b under slowloris: %v", err)
	}
	cmTook := time.Since(start)
	if err := <-accepted; err != nil {
		t.Fatalf("b accepting: %v", err)
	}
	if path, _ := conn.Path(); path != "tcp" {
		t.Errorf("the CM connection's path is %q, want tcp", path)
	}
	s.end()
	after := f.guard(t, f.b)
	t.Logf("under %d idle connections opened by mallory: a's first WRITE to b (its channel's connect, TLS and hello included) took %v; a's CM connection to b took %v",
		s.opened.Load(), first.Round(time.Microsecond), cmTook.Round(time.Microsecond))
	t.Logf("b's channel: refused %d, cut %d",
		after.Channel.Refused-before.Channel.Refused, after.Channel.Cut-before.Channel.Cut)
	if after.Channel.Refused+after.Channel.Cut == before.Channel.Refused+before.Channel.Cut {
		t.Error("b's channel turned nothing away: the attack never reached its door")
	}
}
