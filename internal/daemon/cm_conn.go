package daemon

import (
	"fmt"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// cmState is where a connection is in the IBTA CM's state machine, from
// this side.
type cmState uint8

const (
	cmReqSent     cmState = iota + 1 // requester: REQ sent, waiting for REP
	cmRepRcvd                        // requester: REP in, waiting for the client to connect its QP
	cmReqRcvd                        // responder: REQ handed to the listener's session
	cmRepSent                        // responder: REP sent, waiting for RTU
	cmEstablished                    // both QPs are in RTS
	cmDreqSent                       // DREQ sent, waiting for DREP
)

var cmStateNames = [...]string{"", "waiting for a reply", "replied to, waiting for the requester's QP",
	"waiting for the listener to answer", "accepted, waiting for the requester's confirmation", "established",
	"disconnecting"}

func (s cmState) String() string {
	if int(s) < len(cmStateNames) {
		return cmStateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// cmConn is one connection (or request) this daemon takes part in.
type cmConn struct {
	id       uint32 // this side's, on the wire
	remoteID uint32 // the peer's; 0 until known
	s        *session
	clientID uint32 // the id s knows it by
	active   bool   // this side dialled
	state    cmState
	peer     *cmPeer // nil once the connection to the peer's daemon is lost
	listener *cmListener
	timeout  time.Duration

	gen   uint32 // counts state changes: a timer armed before one does nothing
	timer *time.Timer

	qpType    uint8
	qpHandle  uint32
	qp        *engine.QP
	localGID  [16]byte
	sgidIndex uint8
	localPort uint16

	remoteGID  [16]byte
	remotePort uint16
	mtu        uint8
}

// add registers c for s under clientID, with a new id.
func (m *cmManager) add(c *cmConn, clientID uint32) {
	c.id = m.newID()
	c.clientID = clientID
	m.conns[c.id] = c
	m.session(c.s).conns[clientID] = c
	if c.remoteID != 0 && c.peer != nil {
		m.remote[remoteKey{c.peer, c.remoteID}] = c
	}
}

// setRemote records the peer's id for c.
func (m *cmManager) setRemote(c *cmConn, id uint32) {
	c.remoteID = id
	if c.peer != nil {
		m.remote[remoteKey{c.peer, id}] = c
	}
}

// remove forgets c.
func (m *cmManager) remove(c *cmConn) {
	c.stopTimer()
	if m.conns[c.id] == c {
		delete(m.conns, c.id)
	}
	k := remoteKey{c.peer, c.remoteID}
	if m.remote[k] == c {
		delete(m.remote, k)
	}
	if cs := m.sessions[c.s]; cs != nil && cs.conns[c.clientID] == c {
		delete(cs.conns, c.clientID)
	}
	if c.listener != nil && c.state == cmReqRcvd {
		c.listener.pending--
	}
	c.listener = nil
}

// to moves c to state st; a timer armed before does nothing.
func (m *cmManager) to(c *cmConn, st cmState) {
	c.state = st
	c.gen++
	c.stopTimer()
}

// arm starts c's timer for its current state.
func (m *cmManager) arm(c *cmConn, d time.Duration) {
	c.stopTimer()
	gen := c.gen
	c.timer = time.AfterFunc(d, func() { m.expire(c, gen) })
}

func (c *cmConn) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// event is an event for c's session about c.
func (c *cmConn) event(t proto.CMEventType) proto.CMEvent {
	return proto.CMEvent{Type: t, ID: c.clientID}
}

// errQPLocked moves c's QP to the error state, as rdma_cm does when a
// connection ends; s.mu is held. A QP destroyed meanwhile is left alone.
func errQPLocked(c *cmConn) {
	if c.qp == nil || c.s.qps[c.qpHandle] != c.qp {
		return
	}
	_, _ = c.qp.Modify(&qpstate.Attr{State: abi.QPStateErr}, qpstate.MaskState)
}

// errQP is errQPLocked for callers that do not hold s.mu (and must not
// hold m.mu: a command holds s.mu and then takes m.mu).
func errQP(c *cmConn) {
	if c.qp == nil {
		return
	}
	c.s.mu.Lock()
	errQPLocked(c)
	c.s.mu.Unlock()
}
