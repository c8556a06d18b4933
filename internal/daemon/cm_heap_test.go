package daemon_test

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// heapMB is the process's heap in use after a collection, in MiB.
func heapMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

// TestCMHeapOfNotReadingListeners measures what listeners that do not
// read their events make the daemon hold (an outside review's scenario):
// four sessions of one uid listen (backlog 4096) and never read their
// socket; peers on 64 other hosts send each 4096 request MADs (56 bytes
// of private data, the shortest CM timeouts, so that each also ends in a
// timeout event) every 1.2 s (QP1's queue drops, and counts, what it
// cannot take). A measurement, not a check: it runs
// when VRDMA_CM_HEAP is a number of seconds (the review's was 12, and
// 30 shows the plateau), without -race for numbers worth quoting:
//
//	VRDMA_CM_HEAP=30 go test -count=1 -run TestCMHeapOfNotReadingListeners -v ./internal/daemon/
func TestCMHeapOfNotReadingListeners(t *testing.T) {
	secs, err := strconv.Atoi(os.Getenv("VRDMA_CM_HEAP"))
	if err != nil || secs <= 0 {
		t.Skip("a measurement: set VRDMA_CM_HEAP to the seconds it should run")
	}
	d := cmDaemon(t)
	const sessions = 4
	before := heapMB()
	var ls []*cmSession
	for i := range sessions {
		ls = append(ls, listenSession(t, d, uint16(7000+i), 4096))
	}
	ps, dst := madPeers(t, d, 64) // one host may have 256 requests being set up
	pd := make([]byte, 56)
	id := uint32(1)
	most := before
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	for round := 1; time.Now().Before(deadline); round++ {
		for i := range ls {
			for range 4096 {
				p := ps[int(id)%len(ps)]
				r := p.REQ(dst, uint16(7000+i), id, pd)
				r.LocalCMResponseTimeout, r.MaxCMRetries = 1, 0 // the requester gives up at once
				p.SendREQ(r)
				id++
			}
		}
		time.Sleep(1200 * time.Millisecond)
		h := heapMB()
		most = max(most, h)
		t.Logf("round %d: %d requests sent, heap %.1f MiB (was %.1f)", round, id-1, h, before)
	}
	after := heapMB()
	t.Logf("%d listener sessions that do not read: heap %.1f -> %.1f MiB, at most %.1f (%.1f MiB per session); %d events wait in the busiest outbox; stats %+v",
		sessions, before, after, most, (most-before)/sessions, d.CMQueued(), d.CMStats())
}
