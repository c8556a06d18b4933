package tcplink

import (
	"net"
	"net/netip"
	"sync"
	"testing"
)

// connCount is how many connections the link has open.
func (l *Link) connCount() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.conns)
}

// settled reports whether a and b have one connection each, the same one,
// up on both ends.
func settled(a, b *node) bool {
	if a.connCount() != 1 || b.connCount() != 1 {
		return false
	}
	pa, pb := a.Peers(), b.Peers()
	return len(pa) == 1 && len(pb) == 1 && pa[0].State == "up" && pb[0].State == "up" &&
		pa[0].Local == pb[0].Remote && pa[0].Remote == pb[0].Local && pa[0].Outgoing != pb[0].Outgoing
}

// A second connection between two connected links, dialled by either
// side: both ends keep the same one, the connection dialled by the side
// that ranks first (A: 127.0.0.1), and close the other.
func TestTieBreak(t *testing.T) {
	tests := []struct {
		name         string
		first, again string // who dials first, who dials the second connection
	}{
		{"A dialled, B dials again", "A", "B"},
		{"B dialled, A dials again", "B", "A"},
		{"A dialled, A dials again", "A", "A"},
		{"B dialled, B dials again", "B", "B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eps endpoints
			a := openNode(t, &eps, addrA, 0, nil)
			b := openNode(t, &eps, addrB, 0, nil)
			nodes := map[string][2]*node{"A": {a, b}, "B": {b, a}}
			first := nodes[tt.first]
			connectPair(t, first[0], first[1])
			waitFor(t, "one connection", func() bool { return settled(a, b) })

			x := nodes[tt.again][0]
			x.mu.RLock()
			p := x.peers[0]
			x.mu.RUnlock()
			if err := p.dial(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the tie-break", func() bool { return settled(a, b) })
			pa := a.Peers()[0]
			if tt.first == "A" || tt.again == "A" {
				// A dialled one of the two: A's ranks first and survives.
				if !pa.Outgoing {
					t.Fatalf("A keeps the connection B dialled: %+v", pa)
				}
			}
			if d := a.Stats().Duplicates + b.Stats().Duplicates; d == 0 {
				t.Fatal("no duplicate counted")
			}
			// Frames flow both ways, in order, on the survivor.
			checkFlow(t, a, b, 100)
			if s := a.Stats().ProtocolErrors + b.Stats().ProtocolErrors; s != 0 {
				t.Fatalf("%d protocol errors", s)
			}
		})
	}
}

// checkFlow sends n frames each way and checks they all arrive in order.
func checkFlow(t *testing.T, a, b *node, n int) {
	t.Helper()
	for _, x := range []*node{a, b} {
		x.sink.mu.Lock()
		x.sink.frames, x.sink.n = nil, 0
		x.sink.mu.Unlock()
	}
	var ab, ba [][]byte
	for i := range n {
		ab = append(ab, testFrame(a.cfg.Addrs[0], b.cfg.Addrs[0], uint32(i), []byte{byte(i), 1}))
		ba = append(ba, testFrame(b.cfg.Addrs[0], a.cfg.Addrs[0], uint32(i), []byte{byte(i), 2}))
	}
	writeAll(t, a.Link, ab, 10)
	writeAll(t, b.Link, ba, 10)
	waitFor(t, "the frames", func() bool { return a.sink.count() == n && b.sink.count() == n })
	checkFrames(t, "A to B", b.sink.got(), ab)
	checkFrames(t, "B to A", a.sink.got(), ba)
}

// Both links send their first frames at once, so both dial: whichever
// way the race goes, they end with one connection, the same on both
// sides, and every frame arrives.
func TestSimultaneousDial(t *testing.T) {
	for i := range 10 {
		var eps endpoints
		a := openNode(t, &eps, addrA, 0, nil)
		b := openNode(t, &eps, addrB, 0, nil)
		var start, wg sync.WaitGroup
		start.Add(1)
		for _, x := range [][2]*node{{a, b}, {b, a}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				send(t, x[0].Link, testFrame(x[0].cfg.Addrs[0], x[1].cfg.Addrs[0], 0, nil))
			}()
		}
		start.Done()
		wg.Wait()
		waitFor(t, "both first frames", func() bool { return a.sink.count() == 1 && b.sink.count() == 1 })
		waitFor(t, "one connection", func() bool { return settled(a, b) })
		checkFlow(t, a, b, 50)
		sa, sb := a.Stats(), b.Stats()
		t.Logf("round %d: connects %d+%d, duplicates %d+%d", i, sa.Connects, sb.Connects, sa.Duplicates, sb.Duplicates)
		a.stop(t)
		b.stop(t)
	}
}

// Frames to two addresses of one peer that resolve to two endpoints: the
// link may dial both before a hello tells it they are one peer, and then
// merges them: one peer, one connection, every frame delivered.
func TestOnePeerTwoEndpoints(t *testing.T) {
	var eps endpoints
	other := netip.MustParseAddr("198.51.100.7")
	a := openNode(t, &eps, addrA, 0, nil)
	b := openNode(t, &eps, addrB, 0, func(c *Config) { c.Addrs = append(c.Addrs, other) })
	_, port, _ := net.SplitHostPort(b.ListenAddr().String())
	eps.set(other, net.JoinHostPort("::ffff:127.0.0.2", port)) // another spelling of B's endpoint
	for round := range 5 {
		n, err := a.WriteBatch([][]byte{
			testFrame(addrA, addrB, 1, nil), testFrame(addrA, other, 2, nil),
			testFrame(addrA, addrB, 3, nil), testFrame(addrA, other, 4, nil),
		})
		if err != nil || n != 4 {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		waitFor(t, "the frames", func() bool { return b.sink.count() == 4*(round+1) })
		waitFor(t, "one connection", func() bool { return settled(a, b) })
	}
	if ps := a.Peers(); len(ps) != 1 || len(ps[0].Addrs) != 2 {
		t.Fatalf("A's peers: %+v, want one with both of B's addresses", ps)
	}
}
