package connmgr

// What unreliable datagrams need of the CM (IBTA Vol. 1 12.9): a REQ, REP
// or DREQ sent again when no answer comes within the peer's response time,
// up to Max CM Retries; MRAs that ask for (and grant) more time; the last
// message sent again on a duplicate; and TIMEWAIT, in which a comm ID that
// ended is not reused and a late REQ naming it is stale. The in-process
// peer needs none of it: it loses nothing.

import (
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/ibcm"
)

// sendConn sends msg for c and keeps it as c's last message. Over MADs, a
// message that waits for an answer (REQ, REP, DREQ) is sent again after
// c.retryInterval, up to c.maxRetries times; m.mu is held.
func (m *Manager) sendConn(c *connection, msg cm.Message, waits bool) {
	m.send(c.peer, c.via(m), msg)
	c.last = msg
	c.retries = 0
	if waits && c.peer != nil && c.peer.gsi {
		m.armRetry(c, c.retryInterval())
	}
}

// armRetry starts c's retransmission timer; m.mu is held.
func (m *Manager) armRetry(c *connection, d time.Duration) {
	if c.rtx != nil {
		c.rtx.Stop()
	}
	gen := c.gen
	c.rtx = time.AfterFunc(d, func() { m.retry(c, gen) })
}

// retry sends c's last message again, or, once c.maxRetries are spent,
// ends c as a timeout.
func (m *Manager) retry(c *connection, gen uint32) {
	m.mu.Lock()
	if m.closed || m.conns[c.id] != c || c.gen != gen || c.last == nil {
		m.mu.Unlock()
		return
	}
	sidr := c.active && c.qpType == uint8(abi.QPTypeUD)
	if onRetryTimer(c.retries, c.maxRetries, sidr) == retryGiveUp { // rules.go
		after := m.expireLocked(c)
		m.mu.Unlock()
		after()
		return
	}
	if c.retries < c.maxRetries {
		c.retries++
	}
	m.mads.retransmits.Add(1)
	m.send(c.peer, c.via(m), c.last)
	m.armRetry(c, c.retryInterval())
	m.mu.Unlock()
}

// resend sends c's last message again: the answer to a duplicate; m.mu is
// held.
func (m *Manager) resend(c *connection) {
	m.mads.duplicates.Add(1)
	if c.last != nil {
		m.send(c.peer, c.via(m), c.last)
	}
}

// onMRA takes a peer's "your message arrived, the answer will take
// longer": the retransmission of what it acknowledges waits its service
// timeout instead.
func (m *Manager) onMRA(p *peer, v *via, r *mra) {
	c := m.connFor(p, v, r)
	if c == nil {
		return
	}
	if mraApplies(r.what, c.active, c.state) { // rules.go
		m.armRetry(c, cmTime(r.serviceTimeout)+2*cmTime(c.packetLife))
	}
}

// sendMRA tells the requester of c, whose REQ came again while the
// listener has not answered, to wait longer; m.mu is held.
func (m *Manager) sendMRA(c *connection) {
	m.mads.duplicates.Add(1)
	m.mads.mraSent.Add(1)
	m.send(c.peer, c.via(m), &mra{LocalID: c.id, RemoteID: c.remoteID, what: ibcm.MsgREQ, serviceTimeout: mraServiceTimeout})
}

// timeWaitEntry is a connection in TIMEWAIT.
type timeWaitEntry struct {
	key   remoteKey
	id    uint32
	until time.Time
}

// enterTimeWait keeps c's comm IDs for the TIMEWAIT time, and reply, the
// answer to send again to a late copy of c's request (a SIDR_REP; nil for
// a connection: a late REQ is stale); m.mu is held.
func (m *Manager) enterTimeWait(c *connection, reply cm.Message) {
	now := time.Now()
	m.pruneTimeWait(now)
	e := timeWaitEntry{key: c.key(), id: c.id, until: now.Add(m.timeWait)}
	m.timeWaitQ = append(m.timeWaitQ, e)
	m.timeWaitIDs[e.id] = struct{}{}
	m.timeWaitRemote[e.key] = reply
}

// pruneTimeWait forgets the connections whose TIMEWAIT is over; m.mu is
// held. Every entry waits as long, so the queue is in order.
func (m *Manager) pruneTimeWait(now time.Time) {
	n := 0
	for _, e := range m.timeWaitQ {
		if e.until.After(now) {
			break
		}
		delete(m.timeWaitIDs, e.id)
		delete(m.timeWaitRemote, e.key)
		n++
	}
	if n > 0 {
		m.timeWaitQ = append(m.timeWaitQ[:0], m.timeWaitQ[n:]...)
	}
}

// inTimeWait reports whether a peer's connection k ended here moments ago.
func (m *Manager) inTimeWait(k remoteKey) bool {
	_, ok := m.timeWaitReply(k)
	return ok
}

// timeWaitReply returns what a peer's request k was answered with, if it
// ended here moments ago.
func (m *Manager) timeWaitReply(k remoteKey) (cm.Message, bool) {
	m.pruneTimeWait(time.Now())
	r, ok := m.timeWaitRemote[k]
	return r, ok
}

// tooManyInProgress reports whether requests from src over MADs may not
// start one more connection here; counted. m.mu is held.
func (m *Manager) tooManyInProgress(p *peer, src [16]byte) bool {
	if !p.gsi || m.inProgress[src] < m.maxInProgress {
		return false
	}
	m.mads.inProgressLimit.Add(1)
	return true
}

// beginInProgress counts c, a request from another host being set up
// here; endInProgress stops counting it (established, or gone). m.mu is
// held.
func (m *Manager) beginInProgress(c *connection) {
	if c.peer != nil && c.peer.gsi && !c.inProgress {
		c.inProgress = true
		m.inProgress[c.remoteGID]++
	}
}

func (m *Manager) endInProgress(c *connection) {
	if !c.inProgress {
		return
	}
	c.inProgress = false
	if m.inProgress[c.remoteGID]--; m.inProgress[c.remoteGID] <= 0 {
		delete(m.inProgress, c.remoteGID)
	}
}
