package connmgr

// TIMEWAIT (IBTA Vol. 1 12.9.8.7): a comm ID that ended is not reused, and
// a late REQ naming it is stale; and the requests from one source being
// set up here over MADs, bounded.

import (
	"time"

	"github.com/vrdma/vrdma/internal/cm"
)

// timeWaits keeps the connections in TIMEWAIT and counts the requests in
// progress per source.
type timeWaits struct {
	*core
	timeWait       time.Duration
	timeWaitQ      []timeWaitEntry
	timeWaitIDs    map[uint32]struct{}
	timeWaitRemote map[remoteKey]cm.Message
	inProgress     map[[16]byte]int // requests being set up, by remote GID (MADs)
	maxInProgress  int
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
func (m *timeWaits) enterTimeWait(c *connection, reply cm.Message) {
	now := time.Now()
	m.tw.pruneTimeWait(now)
	e := timeWaitEntry{key: c.key(), id: c.id, until: now.Add(m.timeWait)}
	m.timeWaitQ = append(m.timeWaitQ, e)
	m.timeWaitIDs[e.id] = struct{}{}
	m.timeWaitRemote[e.key] = reply
}

// pruneTimeWait forgets the connections whose TIMEWAIT is over; m.mu is
// held. Every entry waits as long, so the queue is in order.
func (m *timeWaits) pruneTimeWait(now time.Time) {
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
func (m *timeWaits) inTimeWait(k remoteKey) bool {
	_, ok := m.tw.timeWaitReply(k)
	return ok
}

// timeWaitReply returns what a peer's request k was answered with, if it
// ended here moments ago.
func (m *timeWaits) timeWaitReply(k remoteKey) (cm.Message, bool) {
	m.tw.pruneTimeWait(time.Now())
	r, ok := m.timeWaitRemote[k]
	return r, ok
}

// tooManyInProgress reports whether requests from src over MADs may not
// start one more connection here; counted. m.mu is held.
func (m *timeWaits) tooManyInProgress(p *peer, src [16]byte) bool {
	if !p.gsi || m.inProgress[src] < m.maxInProgress {
		return false
	}
	m.mads.inProgressLimit.Add(1)
	return true
}

// beginInProgress counts c, a request from another host being set up
// here; endInProgress stops counting it (established, or gone). m.mu is
// held.
func (m *timeWaits) beginInProgress(c *connection) {
	if c.peer != nil && c.peer.gsi && !c.inProgress {
		c.inProgress = true
		m.inProgress[c.remoteGID]++
	}
}

func (m *timeWaits) endInProgress(c *connection) {
	if !c.inProgress {
		return
	}
	c.inProgress = false
	if m.inProgress[c.remoteGID]--; m.inProgress[c.remoteGID] <= 0 {
		delete(m.inProgress, c.remoteGID)
	}
}
