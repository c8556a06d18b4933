package attack

import (
	"crypto/tls"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

func modeName(secure bool) string {
	if secure {
		return "mutualTLS"
	}
	return "insecure"
}

// TestHijack: mallory announces host b's address to host a's TCP channel
// while a writes to b, the attack that took over a's peer entry for b and
// captured b's RDMA WRITE payload. Plaintext, and with a certificate naming
// b from a CA of mallory's own: a refuses every attempt, counts it, never
// dials mallory, and every WRITE of a to b arrives at b, checked.
func TestHijack(t *testing.T) {
	for _, secure := range []bool{true, false} {
		t.Run(modeName(secure), func(t *testing.T) {
			f := newScene(t, secure)
			ctx := testCtx(t, 3*time.Minute)
			p := newPair(t, f)
			p.mustWrite(ctx) // a's channel to b is up
			tr := listenTrap(t, f.hm)
			before := f.guard(t, f.a).Channel

			var (
				wg     sync.WaitGroup
				writes int
				werr   error
			)
			wg.Add(1)
			go func() {
				defer wg.Done()
				writes, werr = p.writeFor(ctx, 3*time.Second)
			}()
			const rounds = 20
			attempts := []struct {
				name string
				cfg  *tls.Config
			}{
				{"plaintext hello with b's address", nil},
				{"TLS without a certificate, then b's address", stranger()},
				{"TLS with a forged certificate for b", forgedMember(t, "b")},
			}
			target := net.JoinHostPort(f.ha.IPv4.String(), channelPort)
			for _, at := range attempts {
				for i := 0; i < rounds; i++ {
					got, err := intrude(f.hm, target, at.cfg, channelHello(randomID(), f.hb.IPv4, netip.MustParseAddr("fe80::1")), 2*time.Second)
					if err != nil {
						t.Fatalf("%s: %v", at.name, err)
					}
					if got != 0 {
						t.Fatalf("%s: mallory received %d bytes meant for b", at.name, got)
					}
				}
			}
			wg.Wait()
			if werr != nil {
				t.Fatalf("a's WRITEs to b during the attack: %v", werr)
			}
			after := f.guard(t, f.a).Channel
			turnedAway := (after.Refused - before.Refused) + (after.Unauthorized - before.Unauthorized)
			t.Logf("%d WRITEs of %d KiB from a reached b during %d intrusions; a turned away %d (refused %d, unauthorized %d); mallory's trap saw %d connections",
				writes, writeSize>>10, rounds*len(attempts), turnedAway, after.Refused-before.Refused, after.Unauthorized-before.Unauthorized, tr.conns.Load())
			if writes == 0 {
				t.Error("no WRITE went through during the attack")
			}
			if turnedAway < uint64(rounds*len(attempts)) {
				t.Errorf("a counted %d intrusions turned away, want at least %d", turnedAway, rounds*len(attempts))
			}
			if after.Peers != 1 {
				t.Errorf("a has %d peers on its TCP channel, want 1 (b)", after.Peers)
			}
			if n := tr.conns.Load(); n != 0 {
				t.Errorf("a daemon dialled mallory %d times", n)
			}
			if !secure && after.Unauthorized-before.Unauthorized < rounds {
				t.Errorf("insecure: %d plaintext hellos refused as unauthorized, want at least %d", after.Unauthorized-before.Unauthorized, rounds)
			}
			p.mustWrite(ctx)
		})
	}
}
