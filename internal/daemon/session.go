package daemon

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"golang.org/x/sys/unix"
)

// session is one client connection: an opened device (or an admin
// connection) and every object created through it, by handle.
type session struct {
	d    *Daemon
	conn *proto.Conn
	cred creds // the peer: pid, uid, gid, groups

	// user is the peer uid's account, charged this session; acct the
	// attached instance's (nil for the default one), charged this session
	// too. held is what the session's objects hold of both (d.quota.mu).
	user *account
	acct *account
	held limitSet

	pinned uint64               // bytes of registered memory this session has the daemon lock (mu)
	mrPins map[uint32]*procPins // by region: the process its bytes are charged to (pinned.go; mu)

	inst    atomic.Pointer[Instance]
	adapter *engine.Adapter

	mu   sync.Mutex
	next uint32
	pds  map[uint32]*engine.PD
	mrs  map[uint32]*engine.MR
	mws  map[uint32]*engine.MW
	cqs  map[uint32]*engine.CQ
	qps  map[uint32]*engine.QP
	srqs map[uint32]*engine.RQ

	xrcds   map[uint32]*xrcdHandle // cmd_xrc.go
	xrcObjs map[uint32]*xrcdHandle // XRC SRQs and target QPs, by handle: the XRC domain handle they hold
	// openedQPs are the QP handles ibv_open_qp gave (charged a QP, no ring).
	openedQPs map[uint32]bool

	// Address handles have their own lock: the engine resolves them while
	// running a QP, which a command holding mu may be waiting for.
	ahMu sync.Mutex
	ahs  map[uint32]qpstate.AddressVector
	ahPD map[uint32]*engine.PD

	// from is the connection of the device command running (mu): the
	// session's own, or one ibv_import_device added (import.go).
	from   *proto.Conn
	joined joinedConns

	events  chan proto.Event
	dropped atomic.Uint64
	done    chan struct{}
	cmOut   *cmOutbox // connection manager events (cm_events.go)
}

func newSession(d *Daemon, c *proto.Conn, cred creds, user *account) *session {
	s := &session{
		d: d, conn: c, cred: cred, user: user,
		pds: map[uint32]*engine.PD{}, mrs: map[uint32]*engine.MR{}, mws: map[uint32]*engine.MW{}, cqs: map[uint32]*engine.CQ{},
		qps: map[uint32]*engine.QP{}, srqs: map[uint32]*engine.RQ{}, mrPins: map[uint32]*procPins{},
		xrcds: map[uint32]*xrcdHandle{}, xrcObjs: map[uint32]*xrcdHandle{}, openedQPs: map[uint32]bool{},
		ahs: map[uint32]qpstate.AddressVector{}, ahPD: map[uint32]*engine.PD{},
		events: make(chan proto.Event, 256), done: make(chan struct{}), cmOut: newCMOutbox(),
	}
	return s
}

// take charges n of r to the session's uid and instance before an object
// is created, and admits the descriptors it will hold; give gives them
// back when it is destroyed.
func (s *session) take(r Resource, n uint64) error {
	if err := s.d.quota.charge(&s.held, r, n, s.user, s.acct); err != nil {
		s.d.warns.every("quota:"+r.String(), "a client reached a limit", "peer", s.cred.String(), "pid", s.cred.pid, "err", err)
		return err
	}
	if err := s.d.fds.admit(n * fdCost[r]); err != nil {
		s.give(r, n)
		s.d.warns.every("fd-reserve", "the daemon's descriptors are down to its reserve: client objects are refused", "peer", s.cred.String(), "pid", s.cred.pid, "err", err)
		return err
	}
	return nil
}

func (s *session) give(r Resource, n uint64) { s.d.quota.release(&s.held, r, n, s.user, s.acct) }

// limits returns what the session may hold: the smallest of its uid's
// limits, its instance's and the daemon's total.
func (s *session) limits() limitSet {
	l := *s.user.limits
	for r := range numResources {
		l[r] = min(l[r], s.d.quota.all[r])
		if s.acct != nil {
			l[r] = min(l[r], s.acct.limits[r])
		}
	}
	return l
}

// leave gives back the session itself, once it has ended.
func (s *session) leave() {
	s.d.quota.release(nil, Sessions, 1, s.user, s.acct)
	s.d.quota.leave(s.cred.uid, s.user)
}

func (s *session) instance() *Instance { return s.inst.Load() }

// Event queues an asynchronous event for the client; it never blocks the
// engine: a client that does not read its socket loses events, counted.
func (s *session) Event(t abi.EventType, handle uint32, qpn uint32, reason string) {
	select {
	case s.events <- proto.Event{Type: uint8(t), Handle: handle, QPN: qpn, Reason: reason}:
	default:
		s.dropped.Add(1)
	}
}

func (s *session) sendEvents() {
	for {
		select {
		case ev := <-s.events:
			if err := s.conn.Send(proto.Header{Kind: proto.KindEvent, Op: proto.OpEvent}, ev); err != nil {
				return
			}
		case <-s.cmOut.ready:
			if !s.sendCMEvents() {
				return
			}
		case <-s.done:
			return
		}
	}
}

func (s *session) serve() {
	go s.sendEvents()
	// The client's library takes the socket closing for the end of its
	// queues: they are stopped first, the socket closed last. Nothing the
	// teardown waits for writes to the socket (events are queued without
	// blocking; a sendEvents blocked in a write ends when it is closed).
	defer func() {
		close(s.done)
		s.endJoined()
		s.d.cm.CloseSession(s.cm())
		s.closeDeviceCM() // cm_device_route.go
		s.cleanup()
		s.conn.Close()
	}()
	s.serveConn(s.conn, false)
}

// serveConn answers c's requests until it ends: the session's own
// connection, or one ibv_import_device added (import.go, imported). On an
// imported connection a message that is no request is dropped unanswered:
// its other end may be a program that answers errors with errors (another
// daemon, handed over by a hostile client), and the two must not talk for
// ever.
func (s *session) serveConn(c *proto.Conn, imported bool) {
	for {
		h, body, fds, err := c.Recv()
		if err != nil {
			proto.CloseFDs(fds)
			if errors.Is(err, net.ErrClosed) || isEOF(err) {
				return
			}
			var se interface{ Timeout() bool }
			if errors.As(err, &se) {
				return
			}
			if h.Kind == 0 { // undecodable: answer with what we know and go on
				s.replyOn(c, proto.Header{Kind: proto.KindReply, Code: proto.CodeInvalid}, errBody(err))
				if errors.Is(err, proto.ErrMagic) || errors.Is(err, proto.ErrVersionGap) {
					return
				}
				continue
			}
			code := proto.CodeInvalid
			if errors.Is(err, proto.ErrVersionGap) {
				code = proto.CodeVersion
			}
			s.replyOn(c, proto.Header{Kind: proto.KindReply, Op: h.Op, ID: h.ID, Code: code}, errBody(err))
			if errors.Is(err, proto.ErrVersionGap) {
				return
			}
			continue
		}
		if h.Kind != proto.KindRequest {
			proto.CloseFDs(fds)
			if imported {
				continue
			}
			s.replyOn(c, proto.Header{Kind: proto.KindReply, Op: h.Op, ID: h.ID, Code: proto.CodeInvalid}, errBody(errors.New("only requests may be sent to the daemon")))
			continue
		}
		resp, outFDs, err := s.handleOn(c, h.Op, body, fds)
		rh := proto.Header{Kind: proto.KindReply, Op: h.Op, ID: h.ID}
		if err != nil {
			rh.Code = proto.CodeOf(err)
			if rh.Code == proto.CodeInternal {
				s.d.log.Warn("command failed", "op", h.Op, "err", err)
			}
			s.replyOn(c, rh, errBody(err))
			continue
		}
		if resp != noReply {
			s.replyOn(c, rh, resp, outFDs...)
		}
		proto.CloseFDs(outFDs) // new descriptors made for this reply
	}
}

// stop ends the session from the daemon's side: its Recv returns (a
// timeout) and serve tears the session down, the socket closed last.
func (s *session) stop() {
	_ = s.conn.Raw().SetReadDeadline(time.Unix(1, 0))
}

// reply sends the reply rh with body resp. One that cannot be sent (above
// proto.MaxReply, its body does not encode, or the socket refuses it:
// too many descriptors in flight, no buffers...) is logged and answered
// with a short error instead, so that no request goes unanswered; one
// that cannot be written because the client went away ends nothing here
// (the next Recv does).
func (s *session) reply(rh proto.Header, resp any, fds ...int) { s.replyOn(s.conn, rh, resp, fds...) }

// replyOn sends the reply rh on c, as reply says.
func (s *session) replyOn(c *proto.Conn, rh proto.Header, resp any, fds ...int) {
	err := c.Send(rh, resp, fds...)
	if err == nil || clientGone(err) {
		return
	}
	s.d.log.Warn("a reply could not be sent: the client gets an error instead", "op", rh.Op, "peer", s.cred.String(), "pid", s.cred.pid, "err", err)
	rh.Code = proto.CodeInternal
	if errors.Is(err, proto.ErrTooLarge) {
		rh.Code = proto.CodeLimit
	}
	_ = c.Send(rh, errResp{Error: fmt.Sprintf("the daemon could not send its %v reply (%v): ask for less, or ask the host's administrator to read the daemon's log", rh.Op, err)})
}

// clientGone reports whether a write failed because the client closed its
// end; any other write error is the daemon's to report.
func clientGone(err error) bool {
	return errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

func isEOF(err error) bool {
	return err != nil && (err.Error() == "EOF" || errors.Is(err, unix.ECONNRESET))
}

type errResp struct {
	Error string `json:"error"`
}

// maxErrMessage bounds the message of an error reply: whatever a refusal
// repeats of a request, the reply stays one short message.
const maxErrMessage = 4096

func errBody(err error) errResp {
	msg := err.Error()
	var pe *proto.Error
	if errors.As(err, &pe) {
		msg = pe.Message
	}
	if len(msg) > maxErrMessage {
		msg = strings.ToValidUTF8(msg[:maxErrMessage], "") + "... (cut)"
	}
	return errResp{Error: msg}
}

func (s *session) handleID() uint32 {
	s.next++
	return s.next
}

// cleanup destroys everything the session still holds. QPs connected to its
// QPs go to ERR with a QP_FATAL event: their peer is gone.
func (s *session) cleanup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, q := range s.qps {
		peers := s.d.host.PeersOf(q)
		if !s.dropQP(h, q) {
			continue // an XRC_RECV QP another process holds too
		}
		for _, p := range peers {
			if p.Events != s {
				p.Fail(abi.EventQPFatal, "the process that owned the connected QP exited")
			}
		}
	}
	for h, r := range s.srqs {
		r.Close()
		delete(s.srqs, h)
	}
	s.closeXRCDs()
	for h, c := range s.cqs {
		c.Close()
		delete(s.cqs, h)
	}
	for h, w := range s.mws {
		w.Dealloc()
		delete(s.mws, h)
	}
	for h, m := range s.mrs {
		pinned := pinnedBy(m)
		m.Deregister()
		delete(s.mrs, h)
		s.unpin(s.mrPins[h], pinned)
		delete(s.mrPins, h)
	}
	s.ahMu.Lock()
	if s.adapter != nil && s.adapter.Uplink() != nil {
		for h, pd := range s.ahPD {
			pd.DestroyDeviceAH(h)
		}
	}
	clear(s.ahs)
	clear(s.ahPD)
	s.ahMu.Unlock()
	clear(s.pds)
	s.d.quota.releaseAll(&s.held, s.user, s.acct)
}

func (s *session) count(st *proto.StatsResp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.PDs += len(s.pds)
	st.MRs += len(s.mrs)
	st.CQs += len(s.cqs)
	st.QPs += len(s.qps)
	st.SRQs += len(s.srqs)
	s.ahMu.Lock()
	st.AHs += len(s.ahs)
	s.ahMu.Unlock()
}

// ah resolves an address handle for the engine (UD work requests).
func (s *session) ah(handle uint32) ([16]byte, uint8, *engine.PD, bool) {
	s.ahMu.Lock()
	defer s.ahMu.Unlock()
	av, ok := s.ahs[handle]
	return av.DGID, av.SGIDIndex, s.ahPD[handle], ok
}
