package vrdma

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/proto"
)

// TestRefusalHeardAfterTheEnd: a daemon at its session limit says so as it
// accepts, before the library's hello, and closes. When the library's
// reader has already taken the refusal and seen the end (a loaded machine
// schedules the hello late), the hello still reports the refusal (ErrLimit
// and the daemon's reason), not that the daemon went away: the CI's
// TestSessionLoopStopsAtQuota once heard "the vrdma daemon went away".
func TestRefusalHeardAfterTheEnd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "refusing.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const reason = "uid 60001 has 111 sessions, its limit (limit session=111): close some, or raise it with --limit session=N"
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		pc := proto.NewConn(c)
		_ = pc.Send(proto.Header{Kind: proto.KindReply, Op: proto.OpHello, Code: proto.CodeLimit}, map[string]string{"error": reason})
		pc.Close() // nothing unread: the refusal stays readable
	}()
	c, err := dial(Options{Socket: sock}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	select {
	case <-c.dead: // the reader took the refusal and the end before any request
	case <-time.After(30 * time.Second):
		t.Fatal("the library's reader did not see the refused connection end")
	}
	_, err = c.call(proto.OpHello, proto.HelloReq{}, nil)
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "limit session=111") {
		t.Fatalf("hello after the refusal was read: %v; want ErrLimit with the daemon's reason", err)
	}
}
