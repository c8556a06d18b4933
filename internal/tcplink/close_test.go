package tcplink

import (
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// Close ends Serve and every goroutine of the link, whatever its
// connections were doing: up and busy, in their handshake, dialling a peer
// that does not answer, or waiting for Serve.
func TestCloseLeavesNothing(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, eps *endpoints, a, b *node)
	}{
		{"idle", func(t *testing.T, eps *endpoints, a, b *node) {}},
		{"connected", func(t *testing.T, eps *endpoints, a, b *node) { connectPair(t, a, b) }},
		{"busy", func(t *testing.T, eps *endpoints, a, b *node) {
			connectPair(t, a, b)
			go func() {
				f := testFrame(addrA, addrB, 1, make([]byte, 4000))
				for {
					if _, err := a.WriteBatch([][]byte{f, f, f, f}); err != nil {
						return
					}
				}
			}()
			waitFor(t, "traffic", func() bool { return b.sink.count() > 100 })
		}},
		{"handshake pending", func(t *testing.T, eps *endpoints, a, b *node) {
			c := dialRaw(t, a)
			readHelloOf(t, c, a)
		}},
		{"dialling a silent peer", func(t *testing.T, eps *endpoints, a, b *node) {
			eps.set(addrC, silentListener(t))
			send(t, a.Link, testFrame(addrA, addrC, 1, nil))
			waitFor(t, "the dial", func() bool { return a.connCount() == 1 })
		}},
	}
	for _, tt := range tests {
		before := runtime.NumGoroutine()
		t.Run(tt.name, func(t *testing.T) {
			var eps endpoints
			a := openNode(t, &eps, addrA, 0, func(c *Config) { c.HandshakeTimeout = time.Minute })
			b := openNode(t, &eps, addrB, 0, nil)
			tt.setup(t, &eps, a, b)
			a.stop(t)
			b.stop(t)
		})
		// The subtest's cleanups (raw connections, listeners) have run.
		checkGoroutines(t, before)
	}
}

// A link closed before Serve runs: frames that came were never delivered,
// and a later Serve returns at once.
func TestCloseBeforeServe(t *testing.T) {
	before := runtime.NumGoroutine()
	var eps endpoints
	b := openNode(t, &eps, addrB, 0, nil)
	l, err := Open(Config{Name: "tcp0", Addrs: []netip.Addr{addrA}, Listen: "127.0.0.1:0", Peers: eps.lookup})
	if err != nil {
		t.Fatal(err)
	}
	eps.set(addrA, l.ListenAddr().String())
	send(t, b.Link, testFrame(addrB, addrA, 1, nil))
	waitFor(t, "the connection", func() bool { return l.Stats().Connects == 1 })
	l.Close()
	delivered := 0
	if err := l.Serve(func([]byte) { delivered++ }); err != nil || delivered != 0 {
		t.Fatalf("Serve after Close = %v, delivered %d frames", err, delivered)
	}
	b.stop(t)
	checkGoroutines(t, before)
}
