package connmgr_test

// A fake of QP1 between hosts: the managers' GSIs joined by a network that
// delivers each MAD to the host that has its destination GID, or drops or
// duplicates it as a test's rule says — deterministically, by the MAD's
// attribute and how many of that attribute were sent before.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/ibcm"
)

// fate is what the network does with a MAD.
type fate int

const (
	deliver fate = iota
	drop
	duplicate
)

// gsiNet joins fake GSIs by GID.
type gsiNet struct {
	mu    sync.Mutex
	ends  map[[16]byte]*gsiEnd
	count map[ibcm.AttrID]int
	rule  func(attr ibcm.AttrID, n int) fate // n: how many of attr were sent before; nil: deliver all
	sent  []sentMAD
}

// sentMAD is a MAD the network carried (or dropped).
type sentMAD struct {
	src, dst [16]byte
	mad      [ibcm.MADSize]byte
	fate     fate
}

func (s sentMAD) attr() ibcm.AttrID { return ibcm.AttrID(binary.BigEndian.Uint16(s.mad[16:18])) }

func newGSINet() *gsiNet {
	return &gsiNet{ends: map[[16]byte]*gsiEnd{}, count: map[ibcm.AttrID]int{}}
}

// gsiEnd is one host's QP1 on the network.
type gsiEnd struct {
	n       *gsiNet
	gid     [16]byte
	handler atomic.Pointer[func(*engine.GSIDatagram)]
}

var _ connmgr.GSI = (*gsiEnd)(nil)

// end returns the GSI of the host whose GID is gid.
func (n *gsiNet) end(gid [16]byte) *gsiEnd {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := &gsiEnd{n: n, gid: gid}
	n.ends[gid] = e
	return e
}

func (e *gsiEnd) SetGSIHandler(f func(*engine.GSIDatagram)) {
	if f == nil {
		e.handler.Store(nil)
		return
	}
	e.handler.Store(&f)
}

func (e *gsiEnd) GSIRoute(sgid, dgid [16]byte) error {
	e.n.mu.Lock()
	defer e.n.mu.Unlock()
	if e.n.ends[dgid] == nil {
		return fmt.Errorf("fake: %w", engine.ErrNoRoute)
	}
	return nil
}

func (e *gsiEnd) SendGSI(sgid, dgid [16]byte, dqp uint32, mad []byte) error {
	s := sentMAD{src: sgid, dst: dgid}
	copy(s.mad[:], mad)
	e.n.mu.Lock()
	attr := s.attr()
	if e.n.rule != nil {
		s.fate = e.n.rule(attr, e.n.count[attr])
	}
	e.n.count[attr]++
	e.n.sent = append(e.n.sent, s)
	to := e.n.ends[dgid]
	e.n.mu.Unlock()
	if to == nil {
		return fmt.Errorf("fake: %w", engine.ErrNoRoute)
	}
	times := map[fate]int{deliver: 1, drop: 0, duplicate: 2}[s.fate]
	for range times {
		to.inject(sgid, dgid, s.mad[:])
	}
	return nil
}

// inject hands a MAD to the host's handler, as a link's receiver would.
func (e *gsiEnd) inject(src, dst [16]byte, mad []byte) {
	if h := e.handler.Load(); h != nil {
		(*h)(&engine.GSIDatagram{Src: src, Dst: dst, SrcQP: 1, PKey: 0xffff, MAD: mad})
	}
}

// setRule sets the network's rule from now on.
func (n *gsiNet) setRule(r func(attr ibcm.AttrID, n int) fate) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.rule = r
}

// mads returns the MADs of attribute attr sent so far.
func (n *gsiNet) mads(attr ibcm.AttrID) []sentMAD {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(n.sent), func(s sentMAD) bool { return s.attr() != attr })
}

// madManager runs a manager whose only way to other hosts is the fake
// network, with CM timeouts of about a millisecond so that
// retransmissions come quickly.
func madManager(t testing.TB, n *gsiNet, mod func(*connmgr.Config)) (*connmgr.Manager, *testHost) {
	t.Helper()
	m, h := newManager(t, func(c *connmgr.Config) {
		c.GSI = n.end(c.Host.(*testHost).gid())
		c.ResponseTimeout, c.PacketLife, c.MaxCMRetries = 8, 8, 4 // ~1 ms, 4 retries
		if mod != nil {
			mod(c)
		}
	})
	return m, h
}
