package connmgr

// What unreliable datagrams need of the CM (IBTA Vol. 1 12.9): a REQ, REP
// or DREQ sent again when no answer comes within the peer's response time,
// up to Max CM Retries; MRAs that ask for (and grant) more time; the last
// message sent again on a duplicate; and TIMEWAIT, in which a comm ID that
// ended is not reused and a late REQ naming it is stale (timewait.go). The
// in-process peer needs none of it: it loses nothing.

import (
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/ibcm"
)

// retrier sends what the manager sends a peer, and over MADs sends again
// what goes unanswered.
type retrier struct{ *core }

// send queues msg for p; m.mu is held. Over MADs, v says where it goes
// and what it carries besides (nil: not sent).
func (m *retrier) send(p *peer, v *via, msg cm.Message) {
	if p == nil {
		return
	}
	if p.gsi {
		if v != nil {
			m.mad.queueMAD(v, msg)
		}
		return
	}
	if r, ok := msg.(*cm.REJ); ok {
		r.Text = clip(r.Text)
	}
	if p.local {
		p.pushLocal(msg)
	}
}

// sendConn sends msg for c and keeps it as c's last message. Over MADs, a
// message that waits for an answer (REQ, REP, DREQ) is sent again after
// c.retryInterval, up to c.maxRetries times; m.mu is held.
func (m *retrier) sendConn(c *connection, msg cm.Message, waits bool) {
	m.retr.send(c.peer, c.via(m.core), msg)
	c.last = msg
	c.retries = 0
	if waits && c.peer != nil && c.peer.gsi {
		m.retr.armRetry(c, c.retryInterval())
	}
}

// armRetry starts c's retransmission timer; m.mu is held.
func (m *retrier) armRetry(c *connection, d time.Duration) {
	if c.rtx != nil {
		c.rtx.Stop()
	}
	gen := c.gen
	c.rtx = time.AfterFunc(d, func() { m.retr.retry(c, gen) })
}

// retry sends c's last message again, or, once c.maxRetries are spent,
// ends c as a timeout.
func (m *retrier) retry(c *connection, gen uint32) {
	m.mu.Lock()
	if m.closed || m.conns[c.id] != c || c.gen != gen || c.last == nil {
		m.mu.Unlock()
		return
	}
	sidr := c.active && c.qpType == uint8(abi.QPTypeUD)
	if onRetryTimer(c.retries, c.maxRetries, sidr) == retryGiveUp { // rules.go
		after := m.book.expireLocked(c)
		m.mu.Unlock()
		after()
		return
	}
	if c.retries < c.maxRetries {
		c.retries++
	}
	m.mads.retransmits.Add(1)
	m.retr.send(c.peer, c.via(m.core), c.last)
	m.retr.armRetry(c, c.retryInterval())
	m.mu.Unlock()
}

// resend sends c's last message again: the answer to a duplicate; m.mu is
// held.
func (m *retrier) resend(c *connection) {
	m.mads.duplicates.Add(1)
	if c.last != nil {
		m.retr.send(c.peer, c.via(m.core), c.last)
	}
}

// onMRA takes a peer's "your message arrived, the answer will take
// longer": the retransmission of what it acknowledges waits its service
// timeout instead.
func (m *retrier) onMRA(p *peer, v *via, r *mra) {
	c := m.book.connFor(p, v, r)
	if c == nil {
		return
	}
	if mraApplies(r.what, c.active, c.state) { // rules.go
		m.retr.armRetry(c, cmTime(r.serviceTimeout)+2*cmTime(c.packetLife))
	}
}

// sendMRA tells the requester of c, whose REQ came again while the
// listener has not answered, to wait longer; m.mu is held.
func (m *retrier) sendMRA(c *connection) {
	m.mads.duplicates.Add(1)
	m.mads.mraSent.Add(1)
	m.retr.send(c.peer, c.via(m.core), &mra{LocalID: c.id, RemoteID: c.remoteID, what: ibcm.MsgREQ, serviceTimeout: mraServiceTimeout})
}
