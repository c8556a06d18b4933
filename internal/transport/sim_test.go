package transport

// A deterministic two-QP world: fake memory, fake queues, a simulated
// network with seeded loss, duplication and reordering, a virtual clock.

import (
	"encoding/binary"
	"math/rand"
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

type region struct {
	buf    []byte
	va     uint64
	access abi.Access
}

type recvDone struct {
	id uint64
	c  RecvCompletion
}

type sendDone struct {
	id     uint64
	status abi.Status
}

// node is one QP and everything around it; it implements Env.
type node struct {
	t       testing.TB
	name    string
	qp      *QP
	w       *world
	peer    *node
	regions map[uint32]*region
	windows map[uint32]bool    // bound type 2 windows' rkeys (Invalidate)
	tap     func(*wire.Packet) // sees every packet the node sends
	recvs   []Recv
	sent    []sendDone
	recvd   []recvDone
	drops   map[DropReason]int
	failed  string
	event   abi.EventType
	naks    int // sequence-error NAKs sent
	rnrs    int
	rnrIn   int               // RNR NAKs received
	retries [RetryRNR + 1]int // go-back-Ns by cause
	resent  int               // packets they sent again
	grh     [40]byte
	// room is how many packets the node's link takes before it drains
	// (world.drain); negative: no limit.
	room     int
	overRoom int // packets sent with no room, and dropped
	// xrcSRQs are the XRC SRQ numbers of the node's domain (SelectSRQ);
	// selected the numbers asked for.
	xrcSRQs  map[uint32]bool
	selected []uint32
}

// SelectSRQ implements XRCEnv.
func (n *node) SelectSRQ(srqn uint32) bool {
	n.selected = append(n.selected, srqn)
	return n.xrcSRQs[srqn]
}

func (n *node) Output(p *wire.Packet, src [][]byte, off, cnt int) {
	if n.tap != nil {
		n.tap(p)
	}
	if p.Opcode == wire.TransportRC|wire.OpAcknowledge {
		switch {
		case p.AETH.Syndrome == wire.SyndromeNAKSeq:
			n.naks++
		case wire.SyndromeKind(p.AETH.Syndrome) == 1:
			n.rnrs++
		}
	}
	if n.room == 0 {
		if cnt > 0 {
			n.t.Fatalf("%s: a READ response with no room on the link", n.name)
		}
		n.overRoom++ // dropped, as the link would
		return
	}
	if n.room > 0 {
		n.room--
	}
	c := *p
	c.Payload = Gather(nil, src, off, cnt)
	if len(c.Payload) != cnt {
		n.t.Fatalf("%s: Output asked for %d bytes at %d, spans hold %d", n.name, cnt, off, len(c.Payload))
	}
	if !c.Opcode.Valid() {
		n.t.Fatalf("%s: sent invalid opcode %#x", n.name, c.Opcode)
	}
	n.w.send(n.peer, &c)
}

func (n *node) TxRoom() int { return n.room }

func (n *node) Complete(w *WQE, st abi.Status) { n.sent = append(n.sent, sendDone{w.ID, st}) }

func (n *node) TakeRecv(r *Recv) RecvResult {
	if len(n.recvs) == 0 {
		return RecvEmpty
	}
	*r = n.recvs[0]
	n.recvs = n.recvs[1:]
	return RecvOK
}

func (n *node) CompleteRecv(r *Recv, c *RecvCompletion) {
	n.recvd = append(n.recvd, recvDone{r.ID, *c})
}

func (n *node) Remote(rkey uint32, va uint64, cnt uint32, need abi.Access) []byte {
	r := n.regions[rkey]
	if r == nil || r.access&need != need || va < r.va || va+uint64(cnt) > r.va+uint64(len(r.buf)) {
		return nil
	}
	o := va - r.va
	return r.buf[o : o+uint64(cnt)]
}

func (n *node) Invalidate(rkey uint32) bool {
	if !n.windows[rkey] {
		return false
	}
	delete(n.windows, rkey)
	return true
}

func (n *node) AtomicWrite(t []byte, v uint64) bool {
	binary.LittleEndian.PutUint64(t, v)
	return true
}

func (n *node) Atomic(t []byte, cas bool, cmpAdd, swap uint64) (uint64, bool) {
	v := binary.LittleEndian.Uint64(t)
	if cas {
		if v == cmpAdd {
			binary.LittleEndian.PutUint64(t, swap)
		}
	} else {
		binary.LittleEndian.PutUint64(t, v+cmpAdd)
	}
	return v, true
}

func (n *node) GRH(p *wire.Packet) []byte { n.grh[0] = 0x60; return n.grh[:] }

func (n *node) Fail(ev abi.EventType, reason string) { n.failed, n.event = reason, ev }

func (n *node) Drop(r DropReason) { n.drops[r]++ }

func (n *node) RNR() { n.rnrIn++ }

func (n *node) Retransmit(c RetryCause, k uint32) { n.retries[c]++; n.resent += int(k) }

// world is the simulated network and clock.
type world struct {
	t       testing.TB
	rng     *rand.Rand
	now     int64
	loss    float64 // probability a packet is lost
	dup     float64 // probability a packet is delivered twice
	reorder float64 // probability a packet is held back behind later ones
	down    bool    // everything is lost
	queue   []flight
	sent    int
}

type flight struct {
	to  *node
	p   wire.Packet
	due int64
}

const latency = 2000 // ns per hop

func (w *world) send(to *node, p *wire.Packet) {
	w.sent++
	if w.down || w.rng.Float64() < w.loss {
		return
	}
	due := w.now + latency
	if w.rng.Float64() < w.reorder {
		due += int64(w.rng.Intn(5)+1) * latency
	}
	w.queue = append(w.queue, flight{to, *p, due})
	if w.rng.Float64() < w.dup {
		w.queue = append(w.queue, flight{to, *p, due + latency})
	}
}

// run delivers packets and fires timers until nothing is left to do or
// the virtual time limit passes.
func (w *world) run(nodes []*node, limit int64) {
	for steps := 0; steps < 5_000_000; steps++ {
		// The earliest event: a packet or a timer.
		next, idx := int64(-1), -1
		for i, f := range w.queue {
			if next < 0 || f.due < next {
				next, idx = f.due, i
			}
		}
		var tn *node
		for _, n := range nodes {
			if d := n.qp.Deadline(); d != 0 && (next < 0 || d < next) {
				next, idx, tn = d, -1, n
			}
		}
		if next < 0 || next > limit {
			return
		}
		if next > w.now {
			w.now = next
		}
		if tn != nil {
			tn.qp.Tick(tn, w.now)
			continue
		}
		f := w.queue[idx]
		w.queue = append(w.queue[:idx], w.queue[idx+1:]...)
		f.to.qp.Receive(f.to, &f.p, w.now)
	}
	w.t.Fatal("simulation did not settle")
}

func pair(t testing.TB, typ abi.QPType, seed int64, mod func(*Config)) (*world, *node, *node) {
	w := &world{t: t, rng: rand.New(rand.NewSource(seed))}
	mk := func(name string, qpn, dqpn, sq, rq uint32) *node {
		cfg := Config{Type: typ, QPN: qpn, DestQPN: dqpn, MTU: 256, SendCap: 64, PKey: 0xffff, QKey: 0x11111111,
			Access: abi.AccessRemoteWrite | abi.AccessRemoteRead | abi.AccessRemoteAtomic | abi.AccessLocalWrite,
			SQPSN:  sq, RQPSN: rq, Timeout: 8, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 1, MaxRdAtomic: 4, MaxDestRdAtomic: 16}
		if mod != nil {
			mod(&cfg)
		}
		return &node{t: t, name: name, qp: New(cfg), w: w, regions: map[uint32]*region{}, drops: map[DropReason]int{}, room: -1}
	}
	// PSNs near the wrap, so every test crosses it.
	a := mk("A", 0x11, 0x12, 0xfffff0, 0x00fff8)
	b := mk("B", 0x12, 0x11, 0xfffff8-8, 0xfffff0)
	b.qp.reset(func() Config { c := b.qp.cfg; c.SQPSN = 0x00fff8; return c }())
	a.peer, b.peer = b, a
	return w, a, b
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

var addr4 = netip.MustParseAddr("10.0.0.2")
