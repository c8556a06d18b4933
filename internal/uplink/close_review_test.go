package uplink

import (
	"net/netip"

	"golang.org/x/sys/unix"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"
)

// A write that waits for room in a full socket buffer (the interface's
// queue drains at a few bytes a second) must not keep Close from
// returning: closing the sockets is what ends such a write.
func TestCloseEndsAWriteWaitingForRoom(t *testing.T) {
	for _, gso := range []bool{false, true} {
		n := newTestNet(t)
		if _, err := exec.LookPath("tc"); err != nil {
			t.Skip("needs tc")
		}
		if out, err := exec.Command("ip", "netns", "exec", n.a.ns, "tc", "qdisc", "add", "dev", n.a.dev, "root",
			"tbf", "rate", "8kbit", "burst", "1600", "limit", "1000000000").CombinedOutput(); err != nil {
			t.Fatalf("tc: %v: %s", err, out)
		}
		ip(t, "-n", n.a.ns, "neigh", "add", n.b.v4.String(), "lladdr", n.b.mac.String(), "dev", n.a.dev)
		la := openIn(t, n.a.ns, Config{Name: "a", Netdev: n.a.dev, GSO: gso})
		var batches atomic.Int64
		done := make(chan error, 1)
		go func() {
			psn := uint32(0)
			for {
				fs := writeMessage(n.a.v4, n.b.v4, 1, 0xC000, 0x11, psn, 1024, 1024*40)
				psn += uint32(len(fs))
				if _, err := la.WriteBatch(fs); err != nil {
					done <- err
					return
				}
				batches.Add(1)
			}
		}()
		// Wait until the writer stops making progress: it waits for room.
		last := int64(-1)
		for deadline := time.Now().Add(20 * time.Second); ; {
			time.Sleep(300 * time.Millisecond)
			b := batches.Load()
			if b == last {
				break
			}
			last = b
			if time.Now().After(deadline) {
				t.Fatalf("gso=%v: the writer never blocked", gso)
			}
		}
		closed := make(chan struct{})
		go func() { la.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(3 * time.Second):
			// Let the queue go so that the test ends.
			_ = exec.Command("ip", "netns", "exec", n.a.ns, "tc", "qdisc", "del", "dev", n.a.dev, "root").Run()
			<-closed
			t.Fatalf("gso=%v: Close did not return while a write waited for room", gso)
		}
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatalf("gso=%v: the waiting write did not end after Close", gso)
		}
	}
}

// A write that passed WriteBatch's closed check before Close must not make
// a GSO socket after Close closed them all: nothing would close it.
func TestGSOSenderMakesNoSocketAfterClose(t *testing.T) {
	nsfd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skip(err)
	}
	defer unix.Close(nsfd)
	g := newGSOSender(nsfd, 0)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	f := writeMessage(a, b, 1, 0xC123, 0x11, 5, 256, 256*4)[1]
	g.close()
	if s := g.sock(f, 20); s != nil {
		s.f.Close()
		t.Fatal("the GSO sender made a socket after close")
	}
}
