package proto

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDaemonSideRefusesParts: the daemon's side of a connection (NewConn)
// refuses a message marked as a part of a reply at once, returning its
// descriptors to be closed, and reads the next message as a message of
// its own: nothing is put together, nothing held.
func TestDaemonSideRefusesParts(t *testing.T) {
	c, d := rawPair(t)
	client, daemonSide := NewClientConn(c), NewConn(d)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	part := message(Header{Version: Version, Kind: KindReply, More: true, Op: OpListInstances, ID: 5}, make([]byte, MaxBody))
	rights := unix.UnixRights(int(r.Fd()), int(r.Fd()), int(r.Fd()), int(r.Fd()))
	for i := range 3 {
		if _, _, err := client.Raw().WriteMsgUnix(part, rights, nil); err != nil {
			t.Fatal(err)
		}
		h, body, fds, err := daemonSide.Recv()
		if !errors.Is(err, ErrParts) || h.Kind != KindReply || h.ID != 5 || body != nil {
			t.Fatalf("part %d: Recv %+v, %d bytes, %v; want ErrParts at once", i, h, len(body), err)
		}
		if len(fds) != 4 {
			t.Errorf("part %d: %d descriptors returned to close, want 4", i, len(fds))
		}
		CloseFDs(fds)
		if cap(daemonSide.asm) != 0 {
			t.Errorf("part %d: %d bytes held for parts", i, cap(daemonSide.asm))
		}
	}
}

// rawPair returns two connected unix SOCK_SEQPACKET sockets.
func rawPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "seqpacket")
		defer f.Close()
		fc, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fc.Close() })
		_ = fc.SetDeadline(time.Now().Add(30 * time.Second)) // a hang fails the test
		return fc.(*net.UnixConn)
	}
	return wrap(fds[0]), wrap(fds[1])
}

// TestClientRefusesLaterPartDescriptors: descriptors go with a reply's
// first part only; a later part carrying some is refused at once, its
// descriptors returned to be closed.
func TestClientRefusesLaterPartDescriptors(t *testing.T) {
	a, b := connPair(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	h := Header{Version: Version, Kind: KindReply, More: true, Op: OpListInstances, ID: 2}
	rights := unix.UnixRights(int(r.Fd()))
	for range 2 {
		if _, _, err := a.Raw().WriteMsgUnix(message(h, []byte("{")), rights, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, _, fds, err := b.Recv()
	if !errors.Is(err, ErrParts) {
		t.Errorf("Recv: %v, want ErrParts", err)
	}
	if len(fds) != 2 {
		t.Errorf("%d descriptors returned to close, want 2", len(fds))
	}
	CloseFDs(fds)
}

// TestRecvDropsLargeBuffer: the buffer a large reply was put together in
// is not kept once the next message is read.
func TestRecvDropsLargeBuffer(t *testing.T) {
	a, b := connPair(t)
	go func() {
		_ = a.Send(Header{Kind: KindReply, Op: OpListInstances, ID: 1}, bigReply(1<<20))
		_ = a.Send(Header{Kind: KindEvent, Op: OpEvent}, Event{Type: 1})
	}()
	if _, _, _, err := b.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := b.Recv(); err != nil {
		t.Fatal(err)
	}
	if n := cap(b.asm); n > MaxMessage {
		t.Errorf("%d bytes still held after the large reply was used", n)
	}
}
