package daemon

import (
	"errors"
	"net"
	"time"

	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// listener is what Serve accepts sessions from (a *net.UnixListener).
type listener interface {
	AcceptUnix() (*net.UnixConn, error)
	Close() error
}

// Accept backs off from failures: it starts at acceptBackoffMin and
// doubles up to acceptBackoffMax, like net/http's server.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// Serve accepts sessions until Close. A failure to accept — out of
// descriptors (EMFILE, ENFILE), of memory, a connection aborted — is
// logged (at most once a minute per kind) and retried after a pause: the
// daemon never stops serving because a client exhausted something.
func (d *Daemon) Serve() error {
	var backoff time.Duration
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			if d.isClosed() {
				return nil
			}
			if outOfDescriptors(err) {
				d.spare.shed(d.ln)
			}
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			d.warns.every("accept:"+errKind(err), "accepting a session failed; retrying", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		d.admitSession(c)
	}
}

// errKind names an accept error for the rate limit: its errno, if any.
func errKind(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "other"
}

func (d *Daemon) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// admitSession starts a session on c, or refuses it: its peer's uid is at
// its session limit, or the daemon's descriptors are down to the reserve.
func (d *Daemon) admitSession(c *net.UnixConn) {
	cred := peerCreds(c)
	user := d.quota.join(cred.uid)
	err := d.quota.charge(nil, Sessions, 1, user)
	if err == nil {
		if err = d.fds.admit(fdCost[Sessions]); err != nil {
			d.quota.release(nil, Sessions, 1, user)
		}
	}
	if err != nil {
		d.quota.leave(cred.uid, user)
		d.warns.every("session-refused", "refused a session", "peer", cred.String(), "pid", cred.pid, "err", err)
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			c.Close()
			return
		}
		d.wg.Add(1)
		d.mu.Unlock()
		go func() { // off the accept loop: a client that does not close must not hold up the next
			defer d.wg.Done()
			refuse(c, err, refuseLinger)
		}()
		return
	}
	// Every request says which process sent it (a process that forked
	// passes its connection on): registrations are charged to it (pinned.go).
	_ = proto.PassCredentials(c)
	s := newSession(d, proto.NewConn(c), cred, user)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		s.leave()
		c.Close()
		return
	}
	d.sessions[s] = struct{}{}
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		s.serve()
		d.insts.endSession(s)
	}()
}

// refuse tells a connection why it is refused, in a reply to no request
// (id 0) that the library reports for the call it makes, and closes it.
//
// Closing a unix socket with a message unread resets it: the peer's next
// read fails even with the refusal queued before the reset. A client's
// hello can arrive at any moment, before the refusal or after, so refuse
// shuts its side for writing and discards what arrives until the peer
// closes its end (having read the refusal), a few messages have come, or
// linger has passed; only a client that neither reads nor closes meets
// the reset.
func refuse(c *net.UnixConn, err error, linger time.Duration) {
	pc := proto.NewConn(c)
	_ = pc.Send(proto.Header{Kind: proto.KindReply, Op: proto.OpHello, Code: proto.CodeOf(err)}, errBody(err))
	_ = c.CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(linger))
	var b [1]byte // a message longer than this is discarded whole
	for range refuseDrain {
		if n, err := c.Read(b[:]); err != nil || n == 0 {
			break
		}
	}
	pc.Close()
}

// refuseDrain is how many messages refuse discards at most.
const refuseDrain = 16

// How long refuse waits for the peer to close: off the accept loop
// (admitSession), and on it (spareFD.shed, where the descriptor is the spare).
const (
	refuseLinger = 250 * time.Millisecond
	shedLinger   = 20 * time.Millisecond
)

// shedWait is how long shed waits for the connection it expects.
const shedWait = 10 * time.Millisecond

// spareFD is a descriptor given up to shed a connection when none is
// left (shed): -1 when it is not held.
type spareFD struct{ fd int }

// reserve holds one descriptor for shed.
func (sp *spareFD) reserve() {
	if sp.fd < 0 {
		if fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			sp.fd = fd
		}
	}
}

// close gives the spare descriptor up.
func (sp *spareFD) close() {
	if sp.fd >= 0 {
		unix.Close(sp.fd)
		sp.fd = -1
	}
}

// shed, when accept finds no descriptor left, gives up the spare one to
// accept the connection that waits on ln, tells it the daemon is out of
// descriptors and closes it, so that clients are answered instead of
// left waiting in the backlog; then it takes the spare again.
func (sp *spareFD) shed(ln listener) {
	if sp.fd < 0 {
		return
	}
	sp.close()
	defer sp.reserve()
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		return
	}
	_ = ul.SetDeadline(time.Now().Add(shedWait)) // take one that waits, hardly wait for one
	c, err := ul.AcceptUnix()
	_ = ul.SetDeadline(time.Time{})
	if err != nil {
		return
	}
	refuse(c, proto.Errorf(proto.CodeLimit, "the vrdma daemon has no descriptor left for a new session: try again once other clients have closed theirs; its administrator may raise its RLIMIT_NOFILE (LimitNOFILE=) or lower the tenants' limits (--limit)"), shedLinger)
}
