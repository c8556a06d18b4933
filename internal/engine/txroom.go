package engine

// Backpressure from a link to the transport: how many more packets of a
// connection the link takes before it drops (transport.Env.TxRoom).

import (
	"net/netip"
	"time"
)

// PacedLink is a Link that can say how much it takes before it drops: the
// TCP channel, whose per-peer send queue is bounded. The RC responder sends
// READ responses only as far as it allows and the rest as it drains,
// where a link without it (an uplink: a NIC ring, which may drop) gets
// them all at once.
type PacedLink interface {
	Link
	// QueueRoom returns how many more bytes of frames (each counted with
	// the link's own overhead) to dst the link queues now; negative: no
	// limit, or no way to tell.
	QueueRoom(dst netip.Addr) int
}

// txFrameOverhead bounds what a frame adds to its payload: IPv6, UDP, BTH,
// AETH or RETH, ICRC, and a link's own framing.
const txFrameOverhead = 128

// TxRoom implements transport.Env: the packets of a path-MTU payload the
// connection's link still takes, less those gathered for it and not yet
// handed over.
func (rm *remote) TxRoom() int {
	if !rm.wired {
		return -1
	}
	pl, ok := rm.path.link.(PacedLink)
	if !ok {
		return -1
	}
	room := pl.QueueRoom(rm.path.dst)
	if room < 0 {
		return -1
	}
	n := room / (int(rm.mtu) + txFrameOverhead)
	b := rm.cur
	if b == nil {
		b = &rm.tx
	}
	if b.link == rm.path.link {
		n -= b.n
	}
	return max(n, 0)
}

// tick runs the transport's timers of a QP in RTR, which sends nothing of
// its own but may owe READ responses the link had no room for: they go out
// from Tick. procMu is held.
func (rm *remote) tick() (time.Duration, bool) {
	q := rm.q
	now := nanotime()
	worked := false
	if d := rm.tp.Deadline(); d != 0 && now >= d {
		rm.cur = &rm.tx
		rm.tp.Tick(rm, now)
		rm.cur = nil
		rm.tx.flush()
		releaseAll(&rm.callHeld)
		worked = true
	}
	d := rm.tp.Deadline()
	q.wireDeadline.Store(d)
	if d == 0 {
		return 0, worked
	}
	return time.Duration(max(d-nanotime(), 1)), worked
}
