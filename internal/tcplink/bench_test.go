package tcplink

import (
	"crypto/tls"
	"log/slog"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/pki/pkitest"
)

// benchChannels are the connections the benchmarks run on: plain TCP and
// mutual TLS (see channels).
func benchChannels(b *testing.B) []channel {
	ca := pkitest.NewCA(b, "vrdma bench CA")
	return []channel{
		{"plain", func(string) *tls.Config { return nil }, 0},
		{"TLS", func(ip string) *tls.Config { return ca.Mutual(b, "vrdma daemon "+ip, ip) }, 1},
	}
}

// queuedBytes is what waits in the link's send queues; it allocates
// nothing, unlike Peers.
func (l *Link) queuedBytes() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := 0
	for _, p := range l.peers {
		p.mu.Lock()
		n += len(p.pending)
		p.mu.Unlock()
	}
	return n
}

// benchLink opens a link for addr on loopback that delivers to deliver,
// with TLS config t (nil: plain).
func benchLink(b *testing.B, eps *endpoints, addr netip.Addr, t *tls.Config, deliver func([]byte)) *Link {
	b.Helper()
	l, err := Open(Config{Name: "bench", Addrs: []netip.Addr{addr}, Listen: addr.String() + ":0", Peers: eps.lookup,
		QueueBytes: 8 << 20, TLS: t, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	eps.set(addr, l.ListenAddr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.Serve(deliver)
	}()
	b.Cleanup(func() {
		l.Close()
		<-done
	})
	return l
}

// BenchmarkStream sends frames one way, in batches of 32, as fast as the
// receiver takes them (the sender waits while its queue is over half
// full, so nothing is dropped). One op is one frame; allocs/op counts
// both links.
func BenchmarkStream(b *testing.B) {
	for _, ch := range benchChannels(b) {
		for _, size := range []int{64, 1024, 4096} {
			b.Run(ch.name+"/"+strconv.Itoa(size)+"B", func(b *testing.B) { benchStream(b, ch.tls, size) })
		}
	}
}

func benchStream(b *testing.B, tlsOf func(string) *tls.Config, size int) {
	var eps endpoints
	var got atomic.Uint64
	a := benchLink(b, &eps, addrA, tlsOf(addrA.String()), func([]byte) {})
	benchLink(b, &eps, addrB, tlsOf(addrB.String()), func([]byte) { got.Add(1) })
	batch := make([][]byte, 32)
	for i := range batch {
		batch[i] = testFrame(addrA, addrB, uint32(i), make([]byte, size))
	}
	if _, err := a.WriteBatch(batch[:1]); err != nil {
		b.Fatal(err)
	}
	for got.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	got.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; {
		for a.queuedBytes() > 4<<20 {
			time.Sleep(20 * time.Microsecond)
		}
		k := min(len(batch), b.N-sent)
		n, err := a.WriteBatch(batch[:k])
		if err != nil || n != k {
			b.Fatalf("WriteBatch = %d of %d, %v", n, k, err)
		}
		sent += k
	}
	for got.Load() < uint64(b.N) {
		time.Sleep(20 * time.Microsecond)
	}
	el := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el, "frames/s")
	b.ReportMetric(float64(b.N)*float64(len(batch[0]))/el/1e6, "MB/s")
}

// BenchmarkPingPong bounces one 64-byte-payload frame between two links:
// B's deliver sends it back (as the engine answers from its receiver), A's
// wakes the benchmark. One op is one round trip.
func BenchmarkPingPong(b *testing.B) {
	for _, ch := range benchChannels(b) {
		b.Run(ch.name, func(b *testing.B) { benchPingPong(b, ch.tls) })
	}
}

func benchPingPong(b *testing.B, tlsOf func(string) *tls.Config) {
	var eps endpoints
	var bl *Link
	back := make(chan struct{}, 1)
	pong := [][]byte{testFrame(addrB, addrA, 1, make([]byte, 64))}
	a := benchLink(b, &eps, addrA, tlsOf(addrA.String()), func([]byte) { back <- struct{}{} })
	bl = benchLink(b, &eps, addrB, tlsOf(addrB.String()), func([]byte) { _, _ = bl.WriteBatch(pong) })
	ping := [][]byte{testFrame(addrA, addrB, 1, make([]byte, 64))}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := a.WriteBatch(ping); err != nil {
			b.Fatal(err)
		}
		<-back
	}
}

// BenchmarkHandoff compares the two ways a link can give the engine the
// frames of several connections from one goroutine at a time, without the
// network: readers taking turns with a mutex (the choice), or readers
// copying each frame into a pooled buffer sent over a channel to Serve's
// goroutine. Two readers; one op is one frame delivered.
func BenchmarkHandoff(b *testing.B) {
	frame := testFrame(addrA, addrB, 1, make([]byte, 1024))
	const readers = 2
	b.Run("mutex", func(b *testing.B) {
		var mu sync.Mutex
		var n int
		deliver := func(f []byte) { n += len(f) }
		var wg sync.WaitGroup
		b.ReportAllocs()
		b.ResetTimer()
		for r := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := r; i < b.N; i += readers {
					mu.Lock()
					deliver(frame)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	})
	b.Run("channel", func(b *testing.B) {
		type buf struct{ b []byte }
		pool := sync.Pool{New: func() any { return &buf{b: make([]byte, 0, MaxFrame)} }}
		ch := make(chan *buf, 256)
		var n int
		served := make(chan struct{})
		go func() {
			defer close(served)
			for x := range ch {
				n += len(x.b)
				pool.Put(x)
			}
		}()
		var wg sync.WaitGroup
		b.ReportAllocs()
		b.ResetTimer()
		for r := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := r; i < b.N; i += readers {
					x := pool.Get().(*buf)
					x.b = append(x.b[:0], frame...)
					ch <- x
				}
			}()
		}
		wg.Wait()
		close(ch)
		<-served
	})
}
