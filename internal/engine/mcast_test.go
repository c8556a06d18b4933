package engine

import (
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
)

// groupLink is a link that records the groups it is told to join.
type groupLink struct {
	mu     sync.Mutex
	joined []netip.Addr
	calls  int
}

func (l *groupLink) Name() string                       { return "j0" }
func (l *groupLink) GIDs() [][16]byte                   { return [][16]byte{addrGID(netip.MustParseAddr("10.0.0.1"))} }
func (l *groupLink) ActiveMTU() abi.MTU                 { return abi.MTU1024 }
func (l *groupLink) WriteBatch(f [][]byte) (int, error) { return len(f), nil }
func (l *groupLink) Serve(func([]byte)) error           { select {} }
func (l *groupLink) Close() error                       { return nil }
func (l *groupLink) JoinGroup(g netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.joined = append(l.joined, g)
	return nil
}
func (l *groupLink) LeaveGroup(g netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.joined = slices.DeleteFunc(l.joined, func(x netip.Addr) bool { return x == g })
	return nil
}
func (l *groupLink) groups() []netip.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.joined)
}

func mgid(s string) [16]byte { return netip.MustParseAddr(s).As16() }

// TestMcastFanOut: the members a datagram to a group reaches are the QPs
// attached to it in the sender's scope (the tenant) on this host, and every
// scope's for a datagram from a link; the host's links join the group's IP
// address with the first attachment of any scope and leave it with the
// last; a QP's destruction detaches it.
func TestMcastFanOut(t *testing.T) {
	h := NewHost()
	t.Cleanup(h.Close)
	l := &groupLink{}
	if err := h.AddLink(l); err != nil {
		t.Fatal(err)
	}
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(a)
	pd := a.NewPD()
	cq, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	newQP := func(typ abi.QPType, scope string) *QP {
		q, err := NewQP(QPConfig{PD: pd, Type: typ, SendCQ: cq, RecvCQ: cq, Events: &events{}, Scope: scope,
			Caps: proto.QPCaps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	g4, g6 := mgid("::ffff:239.1.2.3"), mgid("ff0e::1")
	x1, x2, y1 := newQP(abi.QPTypeUD, "uid 1"), newQP(abi.QPTypeUD, "uid 1"), newQP(abi.QPTypeUD, "uid 2")
	defer x2.Destroy()
	for _, q := range []*QP{x1, x2, y1} {
		if added, err := q.AttachMcast(g4); !added || err != nil {
			t.Fatalf("attach: added %v, err %v", added, err)
		}
	}
	if added, err := x1.AttachMcast(g4); added || err != nil {
		t.Errorf("attaching again: added %v, err %v; want neither", added, err)
	}
	if got := h.mc.members("uid 1", g4); !slices.Equal(got, []*QP{x1, x2}) {
		t.Errorf("tenant uid 1's members: %v, want x1, x2", got)
	}
	if got := h.mc.members("uid 2", g4); !slices.Equal(got, []*QP{y1}) {
		t.Errorf("tenant uid 2's members: %v, want y1 alone", got)
	}
	if got := h.mc.wireMembers(g4); len(got) != 3 {
		t.Errorf("a datagram from the link reaches %d QPs, want 3", len(got))
	}
	if got := l.groups(); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("239.1.2.3")}) || l.calls != 1 {
		t.Errorf("the link joined %v in %d calls, want 239.1.2.3 once", got, l.calls)
	}
	if _, err := x1.AttachMcast(g6); err != nil {
		t.Fatal(err)
	}
	if got := l.groups(); !slices.Contains(got, netip.MustParseAddr("ff0e::1")) {
		t.Errorf("the link joined %v, want ff0e::1 among them", got)
	}
	if err := y1.DetachMcast(g6); !errors.Is(err, ErrMcastNotAttached) {
		t.Errorf("detaching from a group not attached: %v, want ErrMcastNotAttached", err)
	}
	if err := y1.DetachMcast(g4); err != nil {
		t.Fatal(err)
	}
	x1.Destroy() // detaches from both groups
	if got := h.mc.members("uid 1", g4); !slices.Equal(got, []*QP{x2}) {
		t.Errorf("after x1's destruction: %v, want x2", got)
	}
	if got := l.groups(); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("239.1.2.3")}) {
		t.Errorf("the link is in %v, want 239.1.2.3 alone (x2 holds it; ff0e::1 had only x1)", got)
	}
	if err := x2.DetachMcast(g4); err != nil {
		t.Fatal(err)
	}
	if got := l.groups(); len(got) != 0 {
		t.Errorf("with no QP attached, the link is still in %v", got)
	}
	if x2.McastAttachments() != 0 {
		t.Errorf("x2 has %d attachments, want 0", x2.McastAttachments())
	}
	y1.Destroy()
}

// TestMcastRefusals: only UD QPs attach, only to multicast GIDs, and a
// group holds MaxMcastQPAttach QPs.
func TestMcastRefusals(t *testing.T) {
	h := NewHost()
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 10}, false)
	h.AddAdapter(a)
	pd := a.NewPD()
	cq, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	newQP := func(typ abi.QPType) *QP {
		q, err := NewQP(QPConfig{PD: pd, Type: typ, SendCQ: cq, RecvCQ: cq, Events: &events{}, Scope: "s",
			Caps: proto.QPCaps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(q.Destroy)
		return q
	}
	g := mgid("ff12::8")
	for _, tc := range []struct {
		name string
		typ  abi.QPType
		gid  [16]byte
		want error
	}{
		{"RC QP", abi.QPTypeRC, g, ErrMcastNotUD},
		{"UC QP", abi.QPTypeUC, g, ErrMcastNotUD},
		{"unicast IPv4", abi.QPTypeUD, mgid("::ffff:10.0.0.1"), ErrMcastNotGroup},
		{"unicast IPv6", abi.QPTypeUD, mgid("fe80::1"), ErrMcastNotGroup},
	} {
		if _, err := newQP(tc.typ).AttachMcast(tc.gid); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for range MaxMcastQPAttach {
		if _, err := newQP(abi.QPTypeUD).AttachMcast(g); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newQP(abi.QPTypeUD).AttachMcast(g); !errors.Is(err, ErrMcastGroupFull) {
		t.Errorf("attachment %d: %v, want ErrMcastGroupFull", MaxMcastQPAttach+1, err)
	}
}

// TestIsMulticastGID follows rdma_rxe's reading of a RoCEv2 DGID.
func TestIsMulticastGID(t *testing.T) {
	for _, tc := range []struct {
		gid  string
		want bool
	}{
		{"ff02::1", true}, {"ff0e::1:2", true}, {"::ffff:224.0.0.1", true}, {"::ffff:239.255.255.255", true},
		{"::ffff:223.255.255.255", false}, {"::ffff:240.0.0.1", false}, {"fe80::1", false}, {"::ffff:10.0.0.1", false},
		{"::e000:1", false}, // not IPv4-mapped
	} {
		if got := IsMulticastGID(mgid(tc.gid)); got != tc.want {
			t.Errorf("IsMulticastGID(%s) = %v, want %v", tc.gid, got, tc.want)
		}
	}
}
