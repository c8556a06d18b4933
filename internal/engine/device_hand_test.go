package engine

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
)

// TestHandPostedRecvs: the receives a client has written into a device
// QP's ring are on the device when HandPostedRecvs returns, without the
// doorbell the runner waits for: the connection manager calls it before
// it tells the peer of the QP, and a device's UD QP drops a datagram that
// arrives before its receive (udaddy's server hung so, once, in CI).
func TestHandPostedRecvs(t *testing.T) {
	x := newFaultFixture(t)
	held := func() int {
		x.f.mu.Lock()
		defer x.f.mu.Unlock()
		n := 0
		for _, b := range x.f.recvs {
			n += len(b)
		}
		return n
	}
	before := held()
	rq := x.q.RQ()
	for i := uint32(2); i < 4; i++ {
		if err := abi.PutRecvWQE(x.q.mem[rq.Entry(i):rq.Entry(i)+rq.Stride], 60+uint64(i), []abi.SGE{{Addr: 0x10000, Length: 64, LKey: x.lkey}}); err != nil {
			t.Fatal(err)
		}
	}
	shm.Store32(x.q.mem, rq.Offset+abi.RingProdOff, 4) // and no doorbell
	x.q.HandPostedRecvs()
	if got := held() - before; got != 2 {
		t.Fatalf("the device holds %d more receives after HandPostedRecvs, want the 2 posted", got)
	}
	x.q.HandPostedRecvs() // nothing more posted: nothing handed twice
	if got := held() - before; got != 2 {
		t.Fatalf("the device holds %d more receives after a second call, want 2", got)
	}
}
