package interop

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// lockedBuffer is a program's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMckeyWithRxe runs Debian's mckey between the guest's rdma-core on
// rdma_rxe and vrdma on the host side of br0, both roles: a receiver that
// joined 239.1.2.4 gets the ten datagrams the other side's sender sends to
// it over RoCEv2 (docs/design/multicast.md). The receiver may join after a
// sender's round (the guest runs under TCG): the sender is run again, ten
// datagrams a round, until the receiver has had its ten.
func TestMckeyWithRxe(t *testing.T) {
	Require(t)
	guesttest.RequirePrograms(t, "mckey")
	lib := guesttest.Library(t)
	g := sharedGuests(t)
	host := g.Host(t)
	d := host.StartDaemon(t)
	d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", HostIface)
	if out, rc := g.Run(t, "A", 30, "command -v mckey"); rc != 0 {
		t.Skipf("the interop guest lacks mckey (shared/interop/setup.sh puts rdmacm-utils' programs into its initramfs): %s", out)
	}
	prog := guesttest.Program{Host: host, Lib: lib, Socket: d.Socket}
	const group = "239.1.2.4"
	guest, ours := GuestIP("A").String(), HostIP.String()

	t.Run("guest receives", func(t *testing.T) {
		id := g.Spawn(t, "A", 240, "mckey -m "+group+" -b "+guest+" -C 10")
		var last []byte
		for round := 0; round < 60 && !g.Done("A", id); round++ {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			out, err := prog.Command(ctx, "mckey", "-m", group, "-b", ours, "-C", "10", "-s").CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("our sender failed (%v):\n%s", err, out)
			}
			last = out
			time.Sleep(2 * time.Second)
		}
		out, rc := g.Wait(t, "A", id, 60)
		if rc != 0 || !strings.Contains(out, "test complete") {
			t.Errorf("the guest's receiver (rc %d):\n%s\nour last sender:\n%s", rc, out, last)
		}
	})

	t.Run("vrdma receives", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		var buf lockedBuffer
		rcv := prog.Command(ctx, "env", "VRDMA_DEBUG=1", "mckey", "-m", group, "-b", ours, "-C", "10")
		rcv.Stdout, rcv.Stderr = &buf, &buf
		if err := rcv.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- rcv.Wait() }()
		for !strings.Contains(buf.String(), "rdma_cm: joined multicast group") {
			select {
			case err := <-done:
				t.Fatalf("our receiver ended (%v) before joining:\n%s", err, buf.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
		var err error
		finished := false
		var guestOut string
		for round := 0; round < 30 && !finished; round++ {
			out, rc := g.Run(t, "A", 120, "mckey -m "+group+" -b "+guest+" -C 10 -s")
			guestOut = out
			if rc != 0 {
				t.Fatalf("the guest's sender failed (rc %d):\n%s", rc, out)
			}
			select {
			case err = <-done:
				finished = true
			case <-time.After(2 * time.Second):
			}
		}
		if !finished {
			t.Fatalf("our receiver did not get ten datagrams in 30 rounds:\n%s\nthe guest's last sender:\n%s", buf.String(), guestOut)
		}
		if err != nil || !strings.Contains(buf.String(), "test complete") {
			t.Errorf("our receiver (%v):\n%s\nthe guest's sender:\n%s", err, buf.String(), guestOut)
		}
	})
}
