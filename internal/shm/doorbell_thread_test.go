package shm

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// WaitThread returns when the doorbell rings, clears it, and returns after
// its timeout when it does not ring.
func TestDoorbellWaitThread(t *testing.T) {
	d, err := NewDoorbell()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	for range 100 { // more rings than the read buffer holds: all cleared
		d.Signal()
	}
	if err := d.WaitThread(time.Minute); err != nil {
		t.Fatalf("WaitThread on a rung doorbell: %v", err)
	}
	if rung(t, d) {
		t.Fatal("the doorbell still rings after WaitThread cleared it")
	}

	go func() {
		time.Sleep(10 * time.Millisecond)
		d.Signal()
	}()
	if err := d.WaitThread(time.Minute); err != nil { // a hang guard, not a timing check
		t.Fatalf("WaitThread while another goroutine rings: %v", err)
	}

	start := time.Now()
	if err := d.WaitThread(5 * time.Millisecond); err != nil {
		t.Fatalf("WaitThread timing out: %v", err)
	}
	if time.Since(start) < 5*time.Millisecond {
		t.Fatalf("WaitThread on a silent doorbell returned after %v, before its timeout", time.Since(start))
	}
}

func TestDoorbellWaitThreadNoReadEnd(t *testing.T) {
	var d Doorbell
	if err := d.WaitThread(time.Millisecond); err == nil {
		t.Fatal("WaitThread on a doorbell without a read end: no error")
	}
}

// rung reports whether d has a ring pending, without waiting.
func rung(t *testing.T, d *Doorbell) bool {
	t.Helper()
	n := 0
	if err := d.rawR.Control(func(fd uintptr) {
		var b [1]byte
		n, _ = readNonblock(int(fd), b[:])
	}); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func readNonblock(fd int, b []byte) (int, error) { return unix.Read(fd, b) }
