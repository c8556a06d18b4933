package fakelink

import (
	"errors"
	"math/rand"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
)

// Faults are the network's misbehaviours, each a probability per frame.
type Faults struct {
	Loss, Duplicate, Reorder, Corrupt float64
	Delay                             time.Duration // added to every frame
}

// Network carries frames between its links.
type Network struct {
	mu     sync.Mutex
	rng    *rand.Rand
	faults Faults
	byAddr map[netip.Addr]*Link
	held   delivery // a frame held back to be delivered after the next (held.to != nil)

	// Counters of what the faults did.
	Lost, Duplicated, Reordered, Corrupted, Unroutable atomic.Uint64
}

type delivery struct {
	to    *Link
	frame *frame
}

// frame is a copy of a frame in flight; frames are pooled, so the network
// allocates nothing per packet once warm.
type frame struct{ b []byte }

var frames = sync.Pool{New: func() any { return &frame{b: make([]byte, 0, 9216)} }}

func newFrame(b []byte) *frame {
	f := frames.Get().(*frame)
	f.b = append(f.b[:0], b...)
	return f
}

// New returns an empty network whose faults draw from seed.
func New(seed int64) *Network {
	return &Network{rng: rand.New(rand.NewSource(seed)), byAddr: make(map[netip.Addr]*Link)}
}

// SetFaults changes the network's faults.
func (n *Network) SetFaults(f Faults) {
	n.mu.Lock()
	n.faults = f
	n.mu.Unlock()
}

// Link is one host's link on the network.
type Link struct {
	net    *Network
	name   string
	gids   [][16]byte
	addrs  []netip.Addr
	mtu    abi.MTU
	rx     chan *frame
	done   chan struct{}
	closed atomic.Bool
	once   sync.Once
}

// ErrClosed is returned by WriteBatch and Serve on a closed link.
var ErrClosed = errors.New("fakelink: link closed")

// Link adds a link with the GID table rxe would give an interface with mac
// and addrs: the fe80::EUI-64 GID, then one per address.
func (n *Network) Link(name string, mac [6]byte, addrs ...netip.Addr) *Link {
	ll := [16]byte{0: 0xfe, 1: 0x80, 8: mac[0] ^ 2, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]}
	l := &Link{net: n, name: name, mtu: abi.MTU1024, rx: make(chan *frame, 4096), done: make(chan struct{})}
	l.gids = append(l.gids, ll)
	l.addrs = append(l.addrs, netip.AddrFrom16(ll))
	for _, a := range addrs {
		l.gids = append(l.gids, a.As16())
		l.addrs = append(l.addrs, a)
	}
	n.mu.Lock()
	for _, a := range l.addrs {
		n.byAddr[a] = l
	}
	n.mu.Unlock()
	return l
}

func (l *Link) Name() string        { return l.name }
func (l *Link) GIDs() [][16]byte    { return l.gids }
func (l *Link) ActiveMTU() abi.MTU  { return l.mtu }
func (l *Link) SetMTU(m abi.MTU)    { l.mtu = m }
func (l *Link) Addrs() []netip.Addr { return l.addrs }

// dst returns the destination address of an IP packet.
func dst(frame []byte) (netip.Addr, bool) {
	if len(frame) >= 20 && frame[0]>>4 == 4 {
		return netip.AddrFrom4([4]byte(frame[16:20])), true
	}
	if len(frame) >= 40 && frame[0]>>4 == 6 {
		return netip.AddrFrom16([16]byte(frame[24:40])), true
	}
	return netip.Addr{}, false
}

// WriteBatch routes each frame to the link that has its destination
// address, through the network's faults.
func (l *Link) WriteBatch(frames [][]byte) (int, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	n := l.net
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, f := range frames {
		a, ok := dst(f)
		to := n.byAddr[a]
		if !ok || to == nil {
			n.Unroutable.Add(1)
			continue
		}
		if n.rng.Float64() < n.faults.Loss {
			n.Lost.Add(1)
			continue
		}
		c := newFrame(f)
		if n.rng.Float64() < n.faults.Corrupt && len(c.b) > 28 {
			c.b[28+n.rng.Intn(len(c.b)-28)] ^= byte(1 + n.rng.Intn(255))
			n.Corrupted.Add(1)
		}
		copies := 1
		if n.rng.Float64() < n.faults.Duplicate {
			copies = 2
			n.Duplicated.Add(1)
		}
		for i := 0; i < copies; i++ {
			if i > 0 {
				c = newFrame(c.b)
			}
			d := delivery{to, c}
			if n.held.to == nil && n.rng.Float64() < n.faults.Reorder {
				n.held = d // goes out after the next frame
				n.Reordered.Add(1)
				continue
			}
			n.deliver(d)
			if h := n.held; h.to != nil {
				n.held = delivery{}
				n.deliver(h)
			}
		}
	}
	return len(frames), nil
}

// Flush delivers a frame held back for reordering.
func (n *Network) Flush() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if h := n.held; h.to != nil {
		n.held = delivery{}
		n.deliver(h)
	}
}

func (n *Network) deliver(d delivery) {
	if n.faults.Delay > 0 {
		time.AfterFunc(n.faults.Delay, func() { d.to.push(d.frame) })
		return
	}
	d.to.push(d.frame)
}

func (l *Link) push(f *frame) {
	if l.closed.Load() {
		frames.Put(f)
		return
	}
	select {
	case l.rx <- f:
	default: // a full receive queue drops, as a socket buffer would
		l.net.Lost.Add(1)
		frames.Put(f)
	}
}

// Serve delivers received frames until Close. A frame held back for
// reordering is let go when nothing else arrives for a millisecond.
func (l *Link) Serve(deliver func(frame []byte)) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return ErrClosed
		case f := <-l.rx:
			deliver(f.b)
			frames.Put(f)
		case <-t.C:
			l.net.Flush()
		}
	}
}

// Close takes the link off the network: frames to it are lost.
func (l *Link) Close() error {
	l.once.Do(func() {
		l.closed.Store(true)
		n := l.net
		n.mu.Lock()
		for _, a := range l.addrs {
			if n.byAddr[a] == l {
				delete(n.byAddr, a)
			}
		}
		n.mu.Unlock()
		close(l.done)
	})
	return nil
}
