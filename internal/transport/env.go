package transport

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

// Env is what a QP's transport needs of the world. Every method is called
// from inside Post, Receive, Tick or Flush, on the caller's goroutine.
type Env interface {
	// Output sends one packet. p has its transport fields set (for UD also
	// Dst); the Env fills in the network fields from the QP's address
	// vector, and n payload bytes gathered from src starting at byte off.
	Output(p *wire.Packet, src [][]byte, off, n int)
	// TxRoom returns how many more packets Output can send now without
	// the link dropping them for want of room; negative: no limit. The
	// responder sends READ responses only as far as it allows, and sends
	// the rest later (Deadline, Tick).
	TxRoom() int

	// Complete reports that a send work request finished with status.
	// Requests complete in the order they were posted, each exactly once.
	Complete(w *WQE, status abi.Status)

	// TakeRecv pops the QP's next receive work request into r, its
	// scatter list resolved with local write access.
	TakeRecv(r *Recv) RecvResult
	// CompleteRecv reports a receive work request finished.
	CompleteRecv(r *Recv, c *RecvCompletion)

	// Remote returns n bytes at va of the region with rkey, if it belongs
	// to the QP's PD and grants need; nil otherwise. n may be 0.
	Remote(rkey uint32, va uint64, n uint32, need abi.Access) []byte
	// Invalidate unbinds the type 2 memory window with rkey, of the QP's
	// PD, for a SEND with Invalidate; false when rkey names no bound type 2
	// window there.
	Invalidate(rkey uint32) bool
	// Atomic executes an atomic on the 8 bytes of target and returns the
	// original value; ok is false when target is not 8-byte aligned.
	Atomic(target []byte, compareSwap bool, compareAdd, swap uint64) (orig uint64, ok bool)
	// AtomicWrite stores v in the 8 bytes of target as one store, after
	// every store before it; false when target is not 8-byte aligned.
	AtomicWrite(target []byte, v uint64) bool

	// GRH returns the 40-byte GRH area for the UD packet p.
	GRH(p *wire.Packet) []byte

	// Fail reports an error that moves the QP to ERR: a responder's class
	// A/C error or a requester error completion. The transport stops; the
	// owner flushes it with Flush.
	Fail(ev abi.EventType, reason string)

	// Drop counts a packet the QP discarded, with the reason.
	Drop(reason DropReason)

	// RNR counts an RNR NAK the requester received.
	RNR()

	// Retransmit counts a go-back-N: the requester sends again from an
	// earlier PSN, packets packets behind where it was, for cause.
	Retransmit(cause RetryCause, packets uint32)
}

// XRCEnv is what the Env of an XRC target adds: SelectSRQ makes the XRC
// SRQ numbered n the one TakeRecv, CompleteRecv, Remote and Invalidate
// work in, and reports false when n names no SRQ of the QP's domain.
type XRCEnv interface {
	SelectSRQ(n uint32) bool
}

// RetryCause says why the requester sent packets again.
type RetryCause uint8

// Retry causes, each counted by the owner.
const (
	RetryTimeout RetryCause = iota // the retransmit timer fired
	RetryNAK                       // a sequence-error NAK, or a gap in READ responses
	RetryImplied                   // an ACK past a READ or atomic whose responses were lost
	RetryRNR                       // an RNR NAK's wait ended
)

// NoEvent is the event of a Fail that raises no affiliated event: a
// requester's error completion moves its QP to ERR silently.
const NoEvent abi.EventType = 0xff

// RecvResult is what TakeRecv found.
type RecvResult uint8

// TakeRecv results.
const (
	RecvOK    RecvResult = iota
	RecvEmpty            // nothing posted: RNR
	RecvBad              // a malformed or unresolvable receive request
)

// Recv is a receive work request taken from the receive queue.
type Recv struct {
	ID     uint64
	Spans  [][]byte // resolved scatter list
	Length uint32   // total bytes the spans hold
	Tag    int      // the owner's bookkeeping
	// Status is what a RecvBad request completes with (LOC_PROT_ERR for a
	// bad key, LOC_QP_OP_ERR for a malformed entry); 0 means the latter.
	Status abi.Status
}

// RecvCompletion is what a receive completed with.
type RecvCompletion struct {
	Status  abi.Status
	Opcode  abi.WCOpcode
	Bytes   uint32
	Imm     uint32
	InvRKey uint32
	Flags   abi.WCFlags
	SrcQP   uint32
	SL      uint8 // a UD receive's: what its GRH area holds (abi.WCSLRoCEv2IPv4, ...)
}

// DropReason says why a packet was discarded.
type DropReason uint8

// Drop reasons, each counted by the owner.
const (
	DropSequence  DropReason = iota // out of sequence (a NAK went out once) or UC gap
	DropDuplicate                   // a duplicate with nothing to answer
	DropState                       // the QP is in error
	DropQKey                        // UD Q_Key mismatch
	DropNoRecv                      // UC/UD: no receive posted
	DropInvalid                     // UC/UD: a request the responder rejects
	DropResponse                    // a response that matches nothing outstanding
)

var dropNames = [...]string{"sequence", "duplicate", "state", "qkey", "no receive", "invalid", "stray response"}

func (d DropReason) String() string {
	if int(d) < len(dropNames) {
		return dropNames[d]
	}
	return "unknown"
}

func badRecvStatus(r *Recv) abi.Status {
	if r.Status != 0 {
		return r.Status
	}
	return abi.StatusLocQPOpErr
}
