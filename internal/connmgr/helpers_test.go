package connmgr_test

// The manager with a fake daemon: a host of engine adapters, and sessions
// that hold engine QPs by handle and collect the events emitted to them.

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm/cmtest"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

const wait = cmtest.Wait // turns a hang into a failure; nothing depends on it

// testHost is a host with one adapter, as a daemon has for its default
// instance.
type testHost struct {
	*engine.Host
	adapter *engine.Adapter
}

var macs atomic.Uint32

func newHost(t testing.TB) *testHost {
	t.Helper()
	n := macs.Add(1)
	h := &testHost{Host: engine.NewHost(),
		adapter: engine.NewAdapter("default", "vrdma0", 0, [6]byte{0x52, 0x54, 0, byte(n >> 16), byte(n >> 8), byte(n)}, false)}
	h.AddAdapter(h.adapter)
	t.Cleanup(func() {
		h.RemoveAdapter(h.adapter)
		h.Close()
	})
	return h
}

// gid is the adapter's GID.
func (h *testHost) gid() [16]byte { return h.adapter.GIDs()[0] }

// newManager runs a manager with no QP1 (the adapters of its host reach
// each other), with mod applied to its config, until the test ends.
func newManager(t testing.TB, mod func(*connmgr.Config)) (*connmgr.Manager, *testHost) {
	t.Helper()
	h := newHost(t)
	cfg := connmgr.Config{Host: h, HostName: "cm-test"}
	if mod != nil {
		mod(&cfg)
	}
	m, err := connmgr.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, h
}

// session is a fake daemon session: connmgr.Session over an adapter,
// with QPs by handle, a queue of the events the manager emits, and a
// quota of listeners and connections.
type session struct {
	t        testing.TB
	adapter  *engine.Adapter
	instance string
	hidden   bool // InstanceFor names the instance to no other session

	mu   sync.Mutex // the session's lock
	qps  map[uint32]*engine.QP
	next uint32

	events  chan proto.CMEvent
	lost    atomic.Int64
	lagging atomic.Bool

	qmu   sync.Mutex
	limit map[connmgr.Resource]int // none: unlimited
	held  map[connmgr.Resource]int
}

var _ connmgr.Session = (*session)(nil)

func newSession(t testing.TB, a *engine.Adapter) *session {
	s := &session{t: t, adapter: a, qps: map[uint32]*engine.QP{}, events: make(chan proto.CMEvent, 1<<12),
		limit: map[connmgr.Resource]int{}, held: map[connmgr.Resource]int{}}
	t.Cleanup(func() {
		if n := s.lost.Load(); n != 0 {
			t.Errorf("%d events were lost: the test's queue is too short", n)
		}
	})
	return s
}

func (s *session) Adapter() *engine.Adapter { return s.adapter }
func (s *session) Lock()                    { s.mu.Lock() }
func (s *session) Unlock()                  { s.mu.Unlock() }
func (s *session) Lagging() bool            { return s.lagging.Load() }

func (s *session) InstanceFor(asker connmgr.Session) string {
	if s.hidden && asker != connmgr.Session(s) {
		return ""
	}
	return s.instance
}

func (s *session) Charge(r connmgr.Resource) error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if lim, ok := s.limit[r]; ok && s.held[r] >= lim {
		return proto.Errorf(proto.CodeLimit, "the test's session holds %d %v of %d allowed", s.held[r], r, lim)
	}
	s.held[r]++
	return nil
}

func (s *session) Uncharge(r connmgr.Resource) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.held[r] == 0 {
		s.t.Errorf("%v given back and none held", r)
		return
	}
	s.held[r]--
}

// holds returns how many r the session is charged for.
func (s *session) holds(r connmgr.Resource) int {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return s.held[r]
}

// limitTo limits the session to n r.
func (s *session) limitTo(r connmgr.Resource, n int) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	s.limit[r] = n
}

func (s *session) Emit(ev proto.CMEvent) {
	select {
	case s.events <- ev:
	default:
		s.lost.Add(1)
	}
}

func (s *session) QP(h uint32) (*engine.QP, error) {
	if q := s.qps[h]; q != nil {
		return q, nil
	}
	return nil, proto.Errorf(proto.CodeNotFound, "no queue pair with handle %d on this device", h)
}

// do runs a command of the session: under its lock, as the daemon runs
// them.
func (s *session) do(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f()
}

// newQP gives the session a QP of type t, in RESET, and returns its handle.
func (s *session) newQP(t abi.QPType) (uint32, *engine.QP) {
	s.t.Helper()
	cq, err := engine.NewCQ(16)
	if err != nil {
		s.t.Fatal(err)
	}
	q, err := engine.NewQP(engine.QPConfig{PD: s.adapter.NewPD(), Type: t, SendCQ: cq, RecvCQ: cq,
		Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		q.Destroy()
		cq.Close()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.qps[s.next] = q
	return s.next, q
}

// event returns the session's next event.
func (s *session) event() proto.CMEvent {
	s.t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-time.After(wait):
		s.t.Fatal("no event")
		return proto.CMEvent{}
	}
}

// discardEvents drops the session's events from now on, until the test
// ends.
func (s *session) discardEvents() {
	done := make(chan struct{})
	s.t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-s.events:
			case <-done:
				return
			}
		}
	}()
}

// listenSession is a session that listens on port.
func listenSession(t testing.TB, m *connmgr.Manager, h *testHost, port uint16, backlog int) *session {
	t.Helper()
	s := newSession(t, h.adapter)
	var got uint16
	if err := s.do(func() (err error) {
		got, err = m.Listen(s, proto.CMListenReq{ID: 1, Port: port, Backlog: backlog})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got != port {
		t.Fatalf("listening on %d, want %d", got, port)
	}
	return s
}

// connect moves q from RESET to RTR towards the peer's QP that ev names,
// and to RTS if rts: what the library's QP.Connect does.
func connect(t testing.TB, q *engine.QP, ev proto.CMEvent, psn uint32, rts bool) {
	t.Helper()
	steps := []struct {
		attr qpstate.Attr
		mask qpstate.Mask
	}{
		{qpstate.Attr{State: abi.QPStateInit, PortNum: 1, AccessFlags: abi.AccessRemoteWrite},
			qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskAccessFlags},
		{qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DGID: [16]byte(ev.GID), SGIDIndex: ev.SGIDIndex, PortNum: 1},
			PathMTU: abi.MTU(ev.MTU), DestQPN: ev.QPN, RQPSN: ev.PSN, MaxDestRdAtomic: ev.RdAtomic, MinRNRTimer: 12},
			qpstate.MaskState | qpstate.MaskAV | qpstate.MaskPathMTU | qpstate.MaskDestQPN | qpstate.MaskRQPSN |
				qpstate.MaskMaxDestRdAtomic | qpstate.MaskMinRNRTimer},
	}
	if rts {
		steps = append(steps, struct {
			attr qpstate.Attr
			mask qpstate.Mask
		}{qpstate.Attr{State: abi.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: psn, MaxRdAtomic: ev.RdAtomic},
			qpstate.MaskState | qpstate.MaskTimeout | qpstate.MaskRetryCnt | qpstate.MaskRNRRetry | qpstate.MaskSQPSN | qpstate.MaskMaxQPRdAtomic})
	}
	for _, st := range steps {
		if _, err := q.Modify(&st.attr, st.mask); err != nil {
			t.Fatalf("modify QP to %v: %v", st.attr.State, err)
		}
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
