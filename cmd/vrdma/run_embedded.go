package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// defaultSocket is where vrdma run looks for a daemon when told of none.
// Tests point it elsewhere.
var defaultSocket = vrdma.DefaultSocket

// userDaemonIdle is how long the user's daemon that vrdma run starts
// stays with no program connected. Tests shorten it.
var userDaemonIdle = 5 * time.Second

// daemonAnswers reports whether something accepts connections at the
// daemon socket path.
func daemonAnswers(path string) bool {
	c, err := net.DialTimeout("unixpacket", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// onUserDaemon returns the socket of the user's own daemon
// (docs/design/embedded-daemon.md), starting it if none answers there, and
// a lease on it: a session, open on a descriptor that the command
// inherits, which keeps the daemon up for as long as the command (or a
// child that keeps the descriptor) runs, connected or not. started says
// whether this call started the daemon.
//
// Every vrdma run of the user with no daemon named shares that one daemon,
// so a server and a client each under vrdma run meet on it. Starts are
// serialized by a lock in the daemon's directory; a daemon that stops
// (idle) while a lease is taken refuses it, and a new one is started.
func onUserDaemon() (sock string, lease *os.File, started bool, err error) {
	dir, err := userDaemonDir()
	if err != nil {
		return "", nil, false, err
	}
	sock = filepath.Join(dir, userSocketName)
	if lease, err := takeLease(sock); err == nil {
		return sock, lease, false, nil
	}
	unlock, err := lockStart(filepath.Join(dir, "start.lock"))
	if err != nil {
		return "", nil, false, err
	}
	defer unlock()
	if lease, err := takeLease(sock); err == nil { // started while this waited for the lock
		return sock, lease, false, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, false, err
	}
	var startErr error
	// A daemon that was stopping, idle, as this began may still hold the
	// socket for a moment: the start fails, or the lease is refused;
	// try again.
	for range 3 {
		cmd := exec.Command(self, "daemon", "--user", "--socket", sock, "--idle-exit", userDaemonIdle.String(), "--detach")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			startErr = fmt.Errorf("starting your own daemon (vrdma daemon --user): %v: %s", err, strings.TrimSpace(out.String()))
			time.Sleep(100 * time.Millisecond)
		} else {
			started = true
		}
		if lease, err := takeLease(sock); err == nil {
			return sock, lease, started, nil
		} else if startErr == nil {
			startErr = fmt.Errorf("your own daemon at %s refused a session: %w", sock, err)
		}
	}
	return "", nil, false, startErr
}

// lockStart takes the lock that serializes starting the user's daemon,
// and returns its release.
func lockStart(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// leaseWait bounds the hello of a lease: a hang guard.
const leaseWait = 10 * time.Second

// takeLease opens a session on the daemon at sock, attached to the default
// instance once the daemon has answered its hello (so the daemon counts
// it), on a descriptor that survives exec.
func takeLease(sock string) (*os.File, error) {
	c, err := proto.Dial(sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	raw := c.Raw()
	if err := raw.SetDeadline(time.Now().Add(leaseWait)); err != nil {
		return nil, err
	}
	const id = 1
	if err := c.Send(proto.Header{Kind: proto.KindRequest, Op: proto.OpHello, ID: id}, proto.HelloReq{Client: "vrdma run (holds the daemon for the command)"}); err != nil {
		return nil, err
	}
	for {
		h, body, fds, err := c.Recv()
		proto.CloseFDs(fds)
		if err != nil {
			return nil, err
		}
		if h.Kind != proto.KindReply || h.ID != id {
			continue // an event
		}
		if h.Code != proto.CodeOK {
			var e struct{ Error string }
			_ = proto.Decode(body, &e)
			return nil, fmt.Errorf("the daemon refused the session: %s", e.Error)
		}
		break
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	f, err := raw.File() // a duplicate, which outlives c
	if err != nil {
		return nil, err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil { // inherited across exec
		f.Close()
		return nil, err
	}
	return f, nil
}

// errNoUserDaemon wraps why vrdma run could not use the user's daemon.
var errNoUserDaemon = errors.New("your own vrdma daemon could not be used")
