package connmgr

import (
	"fmt"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// state is where a connection is in the IBTA CM's state machine, from
// this side.
type state uint8

const (
	reqSent     state = iota + 1 // requester: REQ sent, waiting for REP
	repRcvd                      // requester: REP in, waiting for the client to connect its QP
	reqRcvd                      // responder: REQ handed to the listener's session
	repSent                      // responder: REP sent, waiting for RTU
	established                  // both QPs are in RTS
	dreqSent                     // DREQ sent, waiting for DREP
)

var stateNames = [...]string{"", "waiting for a reply", "replied to, waiting for the requester's QP",
	"waiting for the listener to answer", "accepted, waiting for the requester's confirmation", "established",
	"disconnecting"}

func (s state) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// connection is one connection (or request) this daemon takes part in.
type connection struct {
	id       uint32 // this side's, on the wire
	remoteID uint32 // the peer's; 0 until known
	s        Session
	clientID uint32 // the id s knows it by
	active   bool   // this side dialled
	state    state
	peer     *peer // nil once the connection to the peer's daemon is lost
	listener *listener
	timeout  time.Duration

	gen   uint32 // counts state changes: a timer armed before one does nothing
	timer *time.Timer

	qpType    uint8
	qpHandle  uint32
	qp        *engine.QP
	keepQP    bool // a DREQ leaves qp alone: the session's library ends it (proto.CMConnectReq.KeepQP)
	localGID  [16]byte
	sgidIndex uint8
	localPort uint16

	remoteGID  [16]byte
	remotePort uint16
	mtu        uint8

	removed bool // forgotten, and given back to the session's quota

	// Over CM MADs (peer.gsi): the transaction all the connection's MADs
	// carry, the peer's CA GUID and QPN, the last message sent (sent again
	// on a timeout or a duplicate), the retransmission timer and count,
	// and the CM timing: how long the peer takes to answer (an exponent of
	// 4.096 µs), the packet life time and the Max CM Retries.
	tid         uint64
	remoteQPN   uint32
	last        cm.Message
	rtx         *time.Timer
	retries     uint8
	maxRetries  uint8
	peerTimeout uint8
	packetLife  uint8
	reached     bool // it was established: it leaves through TIMEWAIT
	inProgress  bool // counted in timeWaits.inProgress
	orphan      bool // its session ended: its DREQ goes on until answered, and nobody hears of it
}

// tell emits ev to c's session, unless the session has ended.
func (c *connection) tell(ev proto.CMEvent) {
	if !c.orphan {
		c.s.Emit(ev)
	}
}

// key names c by the peer's side of it: the peer, the peer's GID over
// MADs (comm IDs are the sender's, one space per CM), and its id.
func (c *connection) key() remoteKey {
	k := remoteKey{p: c.peer, id: c.remoteID}
	if c.peer != nil && c.peer.gsi {
		k.gid = c.remoteGID
	}
	return k
}

// via is what c's MADs carry besides their messages.
func (c *connection) via(m *core) *via {
	v := &via{src: c.localGID, dst: c.remoteGID, tid: c.tid, guid: c.s.Adapter().GUID, qpn: c.remoteQPN,
		respTimeout: c.peerTimeout, localTimeout: m.respTimeout, maxRetries: c.maxRetries, xrc: c.qpType == cm.QPTypeXRCSend}
	if c.active && c.state == repRcvd {
		v.rejected = ibcm.MsgREP
	} else if c.active || c.state == established || c.state == dreqSent {
		v.rejected = ibcm.MsgOther
	}
	return v
}

// retryInterval is how long c waits for an answer before sending again:
// the peer's response time and a packet's round trip.
func (c *connection) retryInterval() time.Duration {
	return cmTime(c.peerTimeout) + 2*cmTime(c.packetLife)
}

// cmTime is an IBTA CM time exponent as a duration: 4.096 µs·2^x.
func cmTime(x uint8) time.Duration { return 4096 * time.Nanosecond << min(x, 31) }

// connBook is the connections by id (and by the peer's side), their
// states and their timers.
type connBook struct{ *core }

// newID returns an unused id for a connection of this side: random, so
// that a peer cannot guess the ids of other connections.
func (m *connBook) newID() uint32 {
	for {
		id := m.rng.Uint32()
		_, used := m.conns[id]
		_, waits := m.tw.timeWaitIDs[id]
		if id != 0 && !used && !waits {
			return id
		}
	}
}

// add registers c for s under clientID, with a new id.
func (m *connBook) add(c *connection, clientID uint32) {
	c.id = m.book.newID()
	c.clientID = clientID
	m.conns[c.id] = c
	m.ports.session(c.s).conns[clientID] = c
	if c.remoteID != 0 && c.peer != nil {
		m.remote[c.key()] = c
	}
}

// setRemote records the peer's id for c.
func (m *connBook) setRemote(c *connection, id uint32) {
	c.remoteID = id
	if c.peer != nil {
		m.remote[c.key()] = c
	}
}

// remove forgets c and gives it back to its session's quota.
func (m *connBook) remove(c *connection) {
	c.stopTimer()
	m.tw.endInProgress(c)
	if !c.removed {
		c.removed = true
		c.s.Uncharge(Connections)
	}
	if m.conns[c.id] == c {
		delete(m.conns, c.id)
	}
	k := c.key()
	if m.remote[k] == c {
		delete(m.remote, k)
	}
	if c.reached && c.peer != nil && c.peer.gsi && c.remoteID != 0 {
		m.tw.enterTimeWait(c, nil)
	}
	if sp := m.sessions[c.s]; sp != nil && sp.conns[c.clientID] == c {
		delete(sp.conns, c.clientID)
	}
	if c.listener != nil && c.state == reqRcvd {
		c.listener.pending--
	}
	c.listener = nil
}

// to moves c to state st; a timer armed before does nothing.
func (m *connBook) to(c *connection, st state) {
	c.state = st
	if st == established {
		c.reached = true
		m.tw.endInProgress(c)
	}
	c.gen++
	c.stopTimer()
}

// arm starts c's timer for its current state.
func (m *connBook) arm(c *connection, d time.Duration) {
	if c.timer != nil {
		c.timer.Stop()
	}
	gen := c.gen
	c.timer = time.AfterFunc(d, func() { m.book.expire(c, gen) })
}

func (c *connection) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.rtx != nil {
		c.rtx.Stop()
		c.rtx = nil
	}
}

// event is an event for c's session about c.
func (c *connection) event(t proto.CMEventType) proto.CMEvent {
	return proto.CMEvent{Type: t, ID: c.clientID}
}

// hasQP reports whether c's session still has c's QP under its handle;
// the session's lock is held.
func (c *connection) hasQP() bool {
	q, err := c.s.QP(c.qpHandle)
	return err == nil && q == c.qp
}

// errQPLocked moves c's QP to the error state, as rdma_cm does when a
// connection ends; the session's lock is held. A QP destroyed meanwhile
// is left alone.
func errQPLocked(c *connection) {
	if c.qp == nil || !c.hasQP() {
		return
	}
	_, _ = c.qp.Modify(&qpstate.Attr{State: abi.QPStateErr}, qpstate.MaskState)
}

// errQP is errQPLocked for callers that do not hold the session's lock
// (and must not hold m.mu: a command holds the session's lock and then
// takes m.mu).
func errQP(c *connection) {
	if c.qp == nil {
		return
	}
	c.s.Lock()
	errQPLocked(c)
	c.s.Unlock()
}
