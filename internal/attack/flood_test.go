package attack

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma/switchview"
)

// floodHellos is how many hellos the flood sends: the review's 15,000 took
// a daemon from 82 MB to 736 MB and left 14,888 goroutines behind.
const floodHellos = 15000

// TestHelloFlood: mallory sends 15,000 TCP-channel hellos, each with a
// fresh link ID, to host a. a's memory and threads stay bounded, it keeps
// one peer (b), and traffic between a and b goes on.
func TestHelloFlood(t *testing.T) {
	for _, secure := range []bool{true, false} {
		t.Run(modeName(secure), func(t *testing.T) {
			f := newScene(t, secure)
			ctx := testCtx(t, 3*time.Minute)
			p := newPair(t, f)
			p.mustWrite(ctx)
			pid := f.a.Cmd.Process.Pid
			rss0, threads0 := procStatus(t, pid, "VmRSS"), procStatus(t, pid, "Threads")
			before := f.guard(t, f.a).Channel
			target := net.JoinHostPort(f.ha.IPv4.String(), channelPort)
			start := time.Now()
			const workers = 32
			var wg sync.WaitGroup
			var mu sync.Mutex
			sent, failed := 0, 0
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < floodHellos/workers; i++ {
						c, err := dialFrom(f.hm, target, nil, 2*time.Second)
						if err != nil {
							mu.Lock()
							failed++
							mu.Unlock()
							continue
						}
						_, _ = c.Write(channelHello(randomID(), f.hm.IPv4))
						c.Close()
						mu.Lock()
						sent++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			took := time.Since(start)
			// What the flood left behind, once a has turned away the last
			// hello: a's counters trail the flood (the last connections wait
			// in the accept queue while the flooder is done), so wait for the
			// count itself rather than for two polls that agree, which a
			// loaded machine can give with a hello still in hand.
			turned := func(c switchview.ListenerStats) uint64 {
				return (c.Refused - before.Refused) + (c.Unauthorized - before.Unauthorized) + (c.Cut - before.Cut)
			}
			after := f.guard(t, f.a).Channel
			eventually(t, 30*time.Second, "a has turned away every hello", func() (bool, string) {
				after = f.guard(t, f.a).Channel
				return turned(after) >= uint64(sent), fmt.Sprintf("a turned away %d of %d hellos", turned(after), sent)
			})
			rss1, threads1 := procStatus(t, pid, "VmRSS"), procStatus(t, pid, "Threads")
			t.Logf("%d hellos sent in %v (%d connections refused at connect); daemon a: RSS %d -> %d KiB, threads %d -> %d; channel: peers %d, refused %d, cut %d, unauthorized %d",
				sent, took.Round(time.Millisecond), failed, rss0, rss1, threads0, threads1, after.Peers,
				after.Refused-before.Refused, after.Cut-before.Cut, after.Unauthorized-before.Unauthorized)
			if sent == 0 {
				t.Fatal("no hello got out")
			}
			if after.Peers != 1 {
				t.Errorf("a has %d peers after the flood, want 1 (b)", after.Peers)
			}
			if grew := rss1 - rss0; grew > 64<<10 {
				t.Errorf("a's RSS grew by %d KiB during the flood: peers or connections are kept", grew)
			}
			if grew := threads1 - threads0; grew > 16 {
				t.Errorf("a has %d more threads after the flood", grew)
			}
			p.mustWrite(ctx)
		})
	}
}
