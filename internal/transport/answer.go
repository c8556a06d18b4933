package transport

// Paced answers: the responses of READs and atomics go out in PSN order as
// fast as the link takes them. A READ is answered by ⌈len/MTU⌉ packets at
// once; over a link that holds less than that (the TCP channel's per-peer
// queue, 1 MiB), the rest would be dropped and the requester would ask for
// it again and again. Instead the responder keeps a cursor per answer,
// sends what Env.TxRoom allows, and resumes from Tick (Deadline says when)
// or from the next packet it receives. docs/design/tcp-channel.md,
// *Backpressure*.

import "github.com/vrdma/vrdma/internal/wire"

// answerRetry is how long (ns) the responder waits before it asks the link
// for room again when an answer is cut short; the wait doubles, up to
// answerRetryMax, while the link takes nothing at all (a peer that stopped
// reading costs a wake-up every 5 ms, not every 100 µs).
const (
	answerRetry    = 100_000
	answerRetryMax = 5_000_000
)

// pause arms resumeAt: answerRetry after progress, else twice the last wait.
func (q *QP) pause(now int64, progressed bool) {
	s := &q.rsp
	if progressed || s.retryWait == 0 {
		s.retryWait = answerRetry
	} else {
		s.retryWait = min(2*s.retryWait, answerRetryMax)
	}
	s.resumeAt = now + s.retryWait
}

// answer is the responder's progress through one READ or atomic response.
type answer struct {
	pending bool   // not all of it is sent
	start   uint32 // PSN of its first packet this time (FIRST or ONLY)
	psn     uint32 // next PSN to send
	va      uint64 // next byte to send (READ)
	left    uint32 // bytes still to send (READ)
	msn     uint32 // the MSN its packets carry
}

// queueAnswer starts answering r from psn: n bytes at va for a READ, its
// original value for an atomic. It goes out after the answers before it.
func (q *QP) queueAnswer(env Env, r *resource, psn uint32, va uint64, n uint32, now int64) {
	s := &q.rsp
	if s.answering == 0 {
		s.ansHead = r.index
	}
	if !r.ans.pending {
		s.answering++
	}
	r.ans = answer{pending: true, start: psn, psn: psn, va: va, left: n, msn: s.msn}
	q.sendAnswers(env, now)
}

// dropAnswersFrom forgets the answers not sent yet of the requests from
// psn on: a duplicate request means the requester went back to psn, and
// it asks again for each of them.
func (q *QP) dropAnswersFrom(psn uint32) {
	s := &q.rsp
	for i := range s.res {
		r := &s.res[i]
		if r.ans.pending && psnDiff(r.firstPSN, psn) >= 0 {
			r.ans.pending = false
			s.answering--
		}
	}
	if s.answering == 0 {
		s.resumeAt = 0
	}
}

// sendAnswers sends pending answers, oldest first, as long as the link
// has room; then an ACK held back behind them. If the link runs out of
// room it arms resumeAt.
func (q *QP) sendAnswers(env Env, now int64) {
	s := &q.rsp
	s.resumeAt = 0
	room := env.TxRoom()
	sent := false
	for s.answering > 0 {
		r := &s.res[s.ansHead]
		if !r.ans.pending {
			s.ansHead = (s.ansHead + 1) % len(s.res)
			continue
		}
		for r.ans.pending {
			if room == 0 {
				q.pause(now, sent)
				return
			}
			if !q.sendAnswerPacket(env, r) {
				return // the QP failed
			}
			sent = true
			if room > 0 {
				room--
			}
		}
		s.answering--
		s.ansHead = (s.ansHead + 1) % len(s.res)
	}
	if s.ackOwed {
		if room == 0 {
			q.pause(now, sent)
			return
		}
		s.ackOwed = false
		q.sendAck(env, wire.SyndromeACK, psnAdd(s.epsn, psnMask))
	}
}

// ackOrOwe acknowledges everything received so far, or, while answers
// wait or the link has no room, owes the ACK: it goes out after them
// (sendAnswers), never ahead of a READ's responses.
func (q *QP) ackOrOwe(env Env) {
	s := &q.rsp
	if q.answersPending() {
		s.ackOwed = true
		return
	}
	if env.TxRoom() == 0 {
		s.ackOwed = true
		q.pause(q.now, true)
		return
	}
	q.sendAck(env, wire.SyndromeACK, psnAdd(s.epsn, psnMask))
}

// sendAnswerPacket sends the next packet of r's answer. It returns false
// if the QP failed.
func (q *QP) sendAnswerPacket(env Env, r *resource) bool {
	a := &r.ans
	if r.write {
		q.sendAtomicWriteAck(env, a.psn, a.msn)
		a.pending = false
		return true
	}
	if r.atomic {
		q.sendAtomicAck(env, a.psn, r.orig, a.msn)
		a.pending = false
		return true
	}
	return q.sendReadPacket(env, r, a)
}

// answersPending reports whether answers wait for room: an ACK for a later
// request must not overtake them (the requester would take the READ's
// responses for lost).
func (q *QP) answersPending() bool { return q.rsp.answering > 0 }
