package daemon_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
)

// TestSendRingArmsWithANewValueEachTime: the daemon says notify_gen, and
// each time the QP's worker goes to sleep it arms the send ring's notify
// word with a non-zero value it did not use for the arming before, so a
// library that rang for one value knows when it must ring again
// (docs/design/rings.md, "Doorbell generations").
func TestSendRingArmsWithANewValueEachTime(t *testing.T) {
	sock := daemontest.Start(t)
	c := dial(t, sock)
	defer c.Close()
	qp, fds := hostileQP(t, c)
	defer proto.CloseFDs(fds)
	if !qp.NotifyGen {
		t.Fatal("create_qp's reply does not say notify_gen")
	}
	mem, err := unix.Mmap(fds[0], 0, qp.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	// armed waits (a hang guard, not a timing check) until the worker
	// sleeps with the word set to something other than prev.
	armed := func(prev uint32) uint32 {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if v := shm.Load32(mem, abi.RingNotifyOff); v != 0 && v != prev {
				return v
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("the worker did not arm the send ring again (the word stayed %d)", shm.Load32(mem, abi.RingNotifyOff))
		return 0
	}
	v := armed(0)
	for i := 0; i < 5; i++ {
		if _, err := unix.Write(fds[1], []byte{1}); err != nil { // wake it: it finds nothing and sleeps again
			t.Fatal(err)
		}
		next := armed(v)
		if next == v {
			t.Fatalf("arming %d reused %d", i, v)
		}
		v = next
	}
}
