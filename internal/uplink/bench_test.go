package uplink

import (
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkWriteBatchServe sends 1024-byte-payload RC frames from one
// namespace to the other over the veth pair, in batches of 64, and counts
// what the peer's Serve delivers. One op is one frame sent; allocs/op
// counts both sides. The GSO variants send the MIDDLE packets of one
// long WRITE (runs of 62 frames, one GSO send each) with GSO on at both
// ends.
func BenchmarkWriteBatchServe(b *testing.B) {
	for _, v := range []struct {
		name string
		v6   bool
		gso  bool
	}{{"IPv4", false, false}, {"IPv6", true, false}, {"IPv4-GSO", false, true}, {"IPv6-GSO", true, true}} {
		b.Run(v.name, func(b *testing.B) {
			n := newTestNet(b)
			la := openIn(b, n.a.ns, Config{Name: "a", Netdev: n.a.dev, GSO: v.gso})
			lb := openIn(b, n.b.ns, Config{Name: "b", Netdev: n.b.dev, GSO: v.gso})
			var got atomic.Uint64
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = lb.Serve(func(f []byte) { got.Add(1) })
			}()
			defer func() { lb.Close(); <-done }()
			frames := make([][]byte, batchSize)
			for i := range frames {
				src, dst := n.a.v4, n.b.v4
				if v.v6 {
					src, dst = n.a.v6, n.b.v6
				}
				if v.gso {
					// MIDDLEs with consecutive PSNs; the batch's
					// first starts a new run, as no PSN follows the
					// last one's.
					frames[i] = rcFrame(src, dst, uint16(i+1), 0xC000, 0x07, 0x11, uint32(i), make([]byte, 1024))
					continue
				}
				if v.v6 {
					frames[i] = testFrame6(n.a.v6, n.b.v6, 0, 0, 0xC000, DefaultPort, make([]byte, 1024))
				} else {
					frames[i] = testFrame4(n.a.v4, n.b.v4, uint16(i+1), 0, 0xC000, DefaultPort, make([]byte, 1024))
				}
			}
			// Warm up the neighbour cache.
			if _, err := la.WriteBatch(frames[:1]); err != nil {
				b.Fatal(err)
			}
			waitFor(b, "the first frame", func() bool { return got.Load() == 1 })
			got.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for sent := 0; sent < b.N; {
				k := min(batchSize, b.N-sent)
				m, err := la.WriteBatch(frames[:k])
				if err != nil {
					b.Fatal(err)
				}
				sent += m
			}
			// Let the receiver catch up; what it has not read by then
			// was dropped.
			for last := uint64(0); ; {
				time.Sleep(20 * time.Millisecond)
				g := got.Load()
				if g >= uint64(b.N) || g == last {
					break
				}
				last = g
			}
			el := time.Since(start).Seconds()
			b.StopTimer()
			b.ReportMetric(float64(got.Load())/el, "delivered/s")
			b.ReportMetric(100*(1-float64(got.Load())/float64(b.N)), "%lost")
		})
	}
}
