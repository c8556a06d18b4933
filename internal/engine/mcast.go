package engine

// Multicast groups (docs/design/multicast.md). A UD QP attaches to a group
// by its multicast GID; a datagram sent to that GID with the multicast QPN
// reaches a copy to every QP attached to it: on this host by a copy (the
// memcpy path), on other hosts over the links (mcast_wire.go). Groups are
// kept per scope, the tenant the daemon names, so that one tenant's QPs
// never see another's groups on a host.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
)

// Multicast limits, rdma_rxe's (rxe_param.h): groups per tenant, QPs per
// group, attachments in all.
const (
	MulticastQPN          = 0xFFFFFF
	MaxMcastGroups        = 8192
	MaxMcastQPAttach      = 56
	MaxTotalMcastQPAttach = 0x70000
)

// Errors of AttachMcast and DetachMcast.
var (
	ErrMcastNotUD       = errors.New("only UD QPs attach to multicast groups")
	ErrMcastNotGroup    = errors.New("not a multicast GID")
	ErrMcastGroupFull   = fmt.Errorf("the group has %d QPs attached, the most a group holds", MaxMcastQPAttach)
	ErrMcastTooMany     = fmt.Errorf("the tenant has %d multicast groups on this host, the most it may have", MaxMcastGroups)
	ErrMcastNotAttached = errors.New("the QP is not attached to the group")
	ErrMcastNoHost      = errors.New("the adapter is not on a host")
)

// IsMulticastGID reports whether g is a multicast GID: ff00::/8, or an
// IPv4-mapped address in 224.0.0.0/4 (how rdma_rxe reads a RoCEv2 DGID).
func IsMulticastGID(g [16]byte) bool {
	if g[0] == 0xff {
		return true
	}
	a := netip.AddrFrom16(g)
	return a.Is4In6() && a.Unmap().IsMulticast()
}

// GroupAddr returns the IP destination of a group's datagrams on RoCEv2:
// the IPv4 group of an IPv4-mapped MGID, else the MGID as an IPv6 group.
func GroupAddr(mgid [16]byte) netip.Addr { return netip.AddrFrom16(mgid).Unmap() }

// A GroupJoiner is a link that joins IP multicast groups on its interface
// (the kernel then sends IGMP or MLD reports on the link, as it does for
// rdma_rxe's groups), so that datagrams to them reach its Serve.
type GroupJoiner interface {
	JoinGroup(group netip.Addr) error
	LeaveGroup(group netip.Addr) error
}

type groupKey struct {
	scope string
	mgid  [16]byte
}

// mcastTable is a host's groups. The data path reads a snapshot that
// every change replaces whole, so it takes no lock and allocates nothing.
type mcastTable struct {
	mu     sync.Mutex
	groups map[groupKey][]*QP
	count  map[string]int   // groups per scope
	wire   map[[16]byte]int // groups (of any scope) per MGID: joined on the links while > 0
	snap   atomic.Pointer[mcastSnap]
}

// mcastSnap is what the data path reads.
type mcastSnap struct {
	byKey  map[groupKey][]*QP
	byMGID map[[16]byte][]*QP // every scope's members of an MGID
}

// publish replaces the snapshot; t.mu is held.
func (t *mcastTable) publish() {
	s := &mcastSnap{byKey: make(map[groupKey][]*QP, len(t.groups)), byMGID: make(map[[16]byte][]*QP, len(t.wire))}
	for k, qs := range t.groups {
		s.byKey[k] = qs
		s.byMGID[k.mgid] = append(s.byMGID[k.mgid], qs...)
	}
	t.snap.Store(s)
}

// AttachMcast attaches q to the group mgid of its scope (QPConfig.Scope). It
// reports false when q was attached already (which is not an error, as in
// rdma_rxe).
func (q *QP) AttachMcast(mgid [16]byte) (bool, error) {
	scope := q.scope
	if q.typ != abi.QPTypeUD {
		return false, ErrMcastNotUD
	}
	if !IsMulticastGID(mgid) {
		return false, ErrMcastNotGroup
	}
	h := q.adapter.host
	if h == nil {
		return false, ErrMcastNoHost
	}
	t := &h.mc
	t.mu.Lock()
	k := groupKey{scope, mgid}
	old := t.groups[k]
	if slices.Contains(old, q) {
		t.mu.Unlock()
		return false, nil
	}
	if len(old) >= MaxMcastQPAttach {
		t.mu.Unlock()
		return false, ErrMcastGroupFull
	}
	if old == nil && t.count[scope] >= MaxMcastGroups {
		t.mu.Unlock()
		return false, ErrMcastTooMany
	}
	if t.groups == nil {
		t.groups, t.count, t.wire = map[groupKey][]*QP{}, map[string]int{}, map[[16]byte]int{}
	}
	join := false
	if old == nil {
		t.count[scope]++
		t.wire[mgid]++
		join = t.wire[mgid] == 1
	}
	members := append(slices.Clip(old), q)
	t.groups[k] = members
	t.publish()
	q.mcast = append(q.mcast, k)
	t.mu.Unlock()
	if join {
		h.joinLinks(mgid, true)
	}
	if old == nil {
		h.mcastChanged()
	}
	return true, nil
}

// DetachMcast detaches q from the group mgid of its scope.
func (q *QP) DetachMcast(mgid [16]byte) error {
	if q.typ != abi.QPTypeUD {
		return ErrMcastNotUD
	}
	if !IsMulticastGID(mgid) {
		return ErrMcastNotGroup
	}
	h := q.adapter.host
	if h == nil {
		return ErrMcastNoHost
	}
	if !h.mc.detach(q, groupKey{q.scope, mgid}) {
		return ErrMcastNotAttached
	}
	return nil
}

// McastAttachments returns how many groups q is attached to.
func (q *QP) McastAttachments() int {
	h := q.adapter.host
	if h == nil {
		return 0
	}
	h.mc.mu.Lock()
	defer h.mc.mu.Unlock()
	return len(q.mcast)
}

// detachAllMcast detaches q from every group (its destruction).
func (q *QP) detachAllMcast() {
	h := q.adapter.host
	if h == nil {
		return
	}
	h.mc.mu.Lock()
	keys := slices.Clone(q.mcast)
	h.mc.mu.Unlock()
	for _, k := range keys {
		h.mc.detach(q, k)
	}
}

// detach removes q from group k and leaves the links' group when no scope
// holds it any more. It reports whether q was attached.
func (t *mcastTable) detach(q *QP, k groupKey) bool {
	h := q.adapter.host
	t.mu.Lock()
	old := t.groups[k]
	i := slices.Index(old, q)
	if i < 0 {
		t.mu.Unlock()
		return false
	}
	q.mcast = slices.DeleteFunc(q.mcast, func(x groupKey) bool { return x == k })
	leave, gone := false, len(old) == 1
	if gone {
		delete(t.groups, k)
		if t.count[k.scope]--; t.count[k.scope] == 0 {
			delete(t.count, k.scope)
		}
		if t.wire[k.mgid]--; t.wire[k.mgid] == 0 {
			delete(t.wire, k.mgid)
			leave = true
		}
	} else {
		members := slices.Delete(slices.Clone(old), i, i+1)
		t.groups[k] = members
	}
	t.publish()
	t.mu.Unlock()
	if leave {
		h.joinLinks(k.mgid, false)
	}
	if gone {
		h.mcastChanged()
	}
	return true
}

// members returns the QPs of scope attached to mgid; the slice is not
// changed after it is published.
func (t *mcastTable) members(scope string, mgid [16]byte) []*QP {
	s := t.snap.Load()
	if s == nil {
		return nil
	}
	return s.byKey[groupKey{scope, mgid}]
}

// wireMembers returns every QP of any scope attached to mgid: the
// receivers of a datagram that came over a link, which carries no tenant.
func (t *mcastTable) wireMembers(mgid [16]byte) []*QP {
	s := t.snap.Load()
	if s == nil {
		return nil
	}
	return s.byMGID[mgid]
}

// joinLinks joins (or leaves) the IP group of mgid on every link that
// joins groups.
func (h *Host) joinLinks(mgid [16]byte, join bool) {
	for _, l := range h.Links() {
		joinLink(l, mgid, join)
	}
}

func joinLink(l Link, mgid [16]byte, join bool) {
	j, ok := l.(GroupJoiner)
	if !ok {
		return
	}
	g := GroupAddr(mgid)
	if join {
		_ = j.JoinGroup(g) // best effort: the link's interface may be down; it counts its failures
	} else {
		_ = j.LeaveGroup(g)
	}
}

// joinedGroups returns the MGIDs the host's links must have joined.
func (h *Host) joinedGroups() [][16]byte {
	h.mc.mu.Lock()
	defer h.mc.mu.Unlock()
	out := make([][16]byte, 0, len(h.mc.wire))
	for g := range h.mc.wire {
		out = append(out, g)
	}
	return out
}

// IsUD reports whether q is a UD QP.
func (q *QP) IsUD() bool { return q.typ == abi.QPTypeUD }
