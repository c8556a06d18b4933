package connmgr

// The rules unreliable datagrams add to the CM (IBTA Vol. 1 12.9), as pure
// functions of a connection's state and what arrived or expired: no I/O,
// no clock, no lock. retry.go and wire.go apply them.

import "github.com/vrdma/vrdma/internal/ibcm"

// answer is what a repeated message gets.
type answer uint8

const (
	answerNothing answer = iota // dropped: the first copy counts
	answerResend                // the connection's last message, again
	answerMRA                   // an MRA: the answer is coming, later
)

// duplicateREQ is what a REQ gets from a peer whose connection (by its
// GID and comm ID) this side has in state st: the REP again if one was
// sent, an MRA while the listener has not answered, nothing once
// established or ending.
func duplicateREQ(st state) answer {
	switch st {
	case reqRcvd:
		return answerMRA
	case repSent:
		return answerResend
	}
	return answerNothing
}

// duplicateREP is what a REP gets that finds its connection past reqSent:
// on the requester's side once established (the RTU was sent), the RTU
// again, since its loss is why the REP came again; nothing otherwise.
func duplicateREP(active bool, st state, fromPeer bool) answer {
	if active && st == established && fromPeer {
		return answerResend
	}
	return answerNothing
}

// retryStep is what a retransmission timer does.
type retryStep uint8

const (
	retrySend   retryStep = iota // send the last message again
	retryGiveUp                  // Max CM Retries spent: end as a timeout
)

// onRetryTimer decides after retries of max were sent. A SIDR_REQ has no
// MRA to ask for more time: it goes on until the dial's own deadline.
func onRetryTimer(retries, max uint8, sidr bool) retryStep {
	if retries >= max && !sidr {
		return retryGiveUp
	}
	return retrySend
}

// mraApplies reports whether an MRA for message what (ibcm.MsgREQ,
// MsgREP) applies to a connection in st: the requester waiting for its
// REP, or the responder waiting for its RTU.
func mraApplies(what uint8, active bool, st state) bool {
	return (what == ibcm.MsgREQ && active && st == reqSent) || (what == ibcm.MsgREP && !active && st == repSent)
}

// mtuRetry returns the path MTU to ask again with after a REJ (invalid
// path MTU) whose ARI is ari, for a REQ that asked for mtu; ok is false
// when the REJ names none smaller (the request fails).
func mtuRetry(ari []byte, mtu uint8) (uint8, bool) {
	if len(ari) != 1 || ari[0] < 1 || ari[0] >= mtu {
		return 0, false
	}
	return ari[0], true
}

// lateMTURejection reports whether a REJ (invalid path MTU) whose ARI is
// ari answers an earlier copy of a REQ that now asks for mtu: it names the
// MTU asked already, which a responder names only to a REQ that asked for
// more. The REQ asked again stands; the REJ is a duplicate.
func lateMTURejection(ari []byte, mtu uint8) bool {
	return len(ari) == 1 && ari[0] == mtu
}
