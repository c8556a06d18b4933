package vrdma

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// Options say which daemon and which instance to use; the zero value reads
// VRDMA_SOCKET, VRDMA_INSTANCE and VRDMA_TIMEOUT from the environment, as
// the guest libraries do.
type Options struct {
	Socket   string // the daemon's socket; default $VRDMA_SOCKET or /run/vrdma/vrdma.sock
	Instance string // the instance to attach to; default $VRDMA_INSTANCE or "default"
	Client   string // a name that shows in the daemon's logs; default the program's name
	// Timeout is how long a command waits for the daemon's reply before it
	// fails with ErrTimeout (the daemon did not answer); default
	// $VRDMA_TIMEOUT (seconds, a fraction allowed) or DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout is how long a command waits for the daemon's reply when
// Options.Timeout is zero: longer than the daemon's slowest command
// (creating an instance waits up to 10 s for the switch, and 10 s more
// for its LIDs).
const DefaultTimeout = 30 * time.Second

// DefaultSocket is where the daemon listens by default.
const DefaultSocket = "/run/vrdma/vrdma.sock"

// TimeoutEnv names the environment variable that sets how long a command
// waits for the daemon's reply, in seconds: the Go library's
// Options.Timeout and the guest libraries' reply timeout alike.
const TimeoutEnv = "VRDMA_TIMEOUT"

func (o Options) withDefaults() (Options, error) {
	if o.Socket == "" {
		o.Socket = os.Getenv("VRDMA_SOCKET")
	}
	if o.Socket == "" {
		o.Socket = DefaultSocket
	}
	if o.Instance == "" {
		o.Instance = os.Getenv("VRDMA_INSTANCE")
	}
	if o.Client == "" && len(os.Args) > 0 {
		o.Client = os.Args[0]
	}
	if o.Timeout <= 0 {
		t, err := timeoutFromEnv()
		if err != nil {
			return o, err
		}
		o.Timeout = t
	}
	return o, nil
}

// timeoutFromEnv reads TimeoutEnv: unset or empty is DefaultTimeout.
func timeoutFromEnv() (time.Duration, error) {
	v := os.Getenv(TimeoutEnv)
	if v == "" {
		return DefaultTimeout, nil
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || !(s > 0) || s > math.MaxInt32/1000.0 {
		return 0, errorf("open", ErrInvalidArgument, "%s=%q is not a number of seconds (like 30 or 0.5): set it to one, or unset it for %v", TimeoutEnv, v, DefaultTimeout)
	}
	return max(time.Duration(s*float64(time.Second)), time.Millisecond), nil
}

type reply struct {
	h    proto.Header
	body []byte
	fds  []int
}

// conn is one session with the daemon: serial request/reply, with events
// arriving in between.
type conn struct {
	pc *proto.Conn

	mu      sync.Mutex // one request in flight
	nextID  uint32
	want    atomic.Uint32 // the id of the request in flight (0: none); the reader drops other replies
	timeout time.Duration // how long a call waits for its reply
	replies chan reply

	onEvent func(proto.Event)
	dead    chan struct{}
	deadErr error
	refused *Error // the daemon refused the session: why (set before dead closes)
	peerPID int

	onCMEvent func(proto.CMEvent) // connection manager events (cm.go)
}

func dial(o Options, onEvent func(proto.Event)) (*conn, error) { return dialEvents(o, onEvent, nil) }

func dialEvents(o Options, onEvent func(proto.Event), onCMEvent func(proto.CMEvent)) (*conn, error) {
	pc, err := proto.Dial(o.Socket)
	if errors.Is(err, unix.EACCES) {
		return nil, &Error{Op: "open", Kind: ErrPermission, Err: err,
			Msg: fmt.Sprintf("not allowed to use the vrdma daemon at %s: the socket's permissions decide who may use the devices; ask for membership of its group (`ls -l %s`)", o.Socket, o.Socket)}
	}
	if err != nil {
		return nil, &Error{Op: "open", Kind: ErrNoDaemon, Err: err,
			Msg: fmt.Sprintf("cannot reach the vrdma daemon at %s (%v): start it with `vrdma daemon`, or point VRDMA_SOCKET at its socket", o.Socket, err)}
	}
	c := &conn{pc: pc, replies: make(chan reply, 1), onEvent: onEvent, onCMEvent: onCMEvent, dead: make(chan struct{}), timeout: o.Timeout}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if raw, err := pc.Raw().SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
				c.peerPID = int(cred.Pid)
			}
		})
	}
	go c.read()
	return c, nil
}

func (c *conn) read() {
	defer close(c.dead)
	reset := false
	for {
		h, body, fds, err := c.pc.Recv()
		if err != nil {
			proto.CloseFDs(fds)
			if c.deadErr == nil {
				c.deadErr = err
			}
			// A daemon that refuses a session says why and closes it; if our
			// first request was still unread then, the kernel reports a reset
			// first. The reason may be queued behind it: read once more.
			if errors.Is(err, unix.ECONNRESET) && !reset {
				reset = true
				continue
			}
			return
		}
		switch h.Kind {
		case proto.KindReply:
			if h.ID == 0 && h.Code != proto.CodeOK {
				// A reply to no request: the daemon refused the session
				// (a limit) and closes it.
				proto.CloseFDs(fds)
				c.refused = fromProto(h.Op.String(), &proto.Error{Op: h.Op, Code: h.Code, Message: errMessage(body)})
				c.deadErr = c.refused
				return
			}
			if h.ID != c.want.Load() {
				// A late reply to a call that gave up waiting (ErrTimeout).
				proto.CloseFDs(fds)
				continue
			}
			c.replies <- reply{h: h, body: append([]byte(nil), body...), fds: fds}
		case proto.KindEvent:
			proto.CloseFDs(fds)
			if h.Op == proto.OpCMEvent {
				var ev proto.CMEvent
				if json.Unmarshal(body, &ev) == nil && c.onCMEvent != nil {
					c.onCMEvent(ev)
				}
				continue
			}
			var ev proto.Event
			if json.Unmarshal(body, &ev) == nil && c.onEvent != nil {
				c.onEvent(ev)
			}
		default:
			proto.CloseFDs(fds)
		}
	}
}

// call sends a request and waits for its reply, decoding the body into resp
// and returning the descriptors that came with it (the caller owns them).
func (c *conn) call(op proto.Op, req any, resp any, fds ...int) ([]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.dead: // fail fast: no request to a daemon known gone
		if c.refused != nil {
			return nil, c.refused // it said why as it accepted us, before this request
		}
		return nil, &Error{Op: op.String(), Kind: ErrDeviceFatal, Err: c.deadErr, Msg: lostMsg}
	default:
	}
	c.nextID++
	id := c.nextID
	c.want.Store(id)
	defer c.want.Store(0)
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	if err := c.pc.Send(proto.Header{Kind: proto.KindRequest, Op: op, ID: id}, req, fds...); err != nil {
		if r := c.refusal(err); r != nil {
			return nil, r
		}
		return nil, &Error{Op: op.String(), Kind: ErrDeviceFatal, Err: err}
	}
	for {
		select {
		case r := <-c.replies:
			if r.h.ID != id {
				proto.CloseFDs(r.fds)
				continue
			}
			if r.h.Code != proto.CodeOK {
				proto.CloseFDs(r.fds)
				return nil, fromProto(op.String(), &proto.Error{Op: op, Code: r.h.Code, Message: errMessage(r.body)})
			}
			if resp != nil {
				if err := json.Unmarshal(r.body, resp); err != nil {
					proto.CloseFDs(r.fds)
					return nil, &Error{Op: op.String(), Kind: ErrVersion, Err: err, Msg: "the daemon's reply did not decode: run a library and daemon of the same release"}
				}
			}
			return r.fds, nil
		case <-c.dead:
			if c.refused != nil {
				return nil, c.refused
			}
			return nil, &Error{Op: op.String(), Kind: ErrDeviceFatal, Err: c.deadErr, Msg: lostMsg}
		case <-timer.C:
			return nil, errorf(op.String(), ErrTimeout, "the vrdma daemon did not answer within %v (pid %d): it may be stuck or overloaded; look at its log, or raise Options.Timeout", c.timeout, c.peerPID)
		}
	}
}

// refusal is why the daemon refused the session, if it did, after a send
// failed with err: a daemon that refuses says why, then closes the
// connection, so the reader ends soon.
func (c *conn) refusal(err error) *Error {
	if !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
		return nil
	}
	<-c.dead
	return c.refused
}

// errMessage reads the message of an error reply.
func errMessage(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error
}

func (c *conn) close() error {
	err := c.pc.Close()
	<-c.dead
	return err
}

// mapShared maps a region the daemon created and passed to us.
func mapShared(fd, size int) (*shm.Region, error) {
	r, err := shm.MapRegion(fd, size)
	if err != nil {
		return nil, errors.Join(ErrVersion, err)
	}
	return r, nil
}
