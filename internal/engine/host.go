package engine

import (
	"sync"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
)

// Host is every adapter of one daemon, indexed by GID so that a destination
// address resolves to the adapter that owns it.
type Host struct {
	mu        sync.RWMutex
	byGID     map[[16]byte]*Adapter
	pdSeq     atomic.Uint64
	poller    *poller // shared by every async-mode adapter; started with the first
	links     []Link
	receivers map[Link]*receiver

	linkGIDs atomic.Pointer[[][16]byte] // every link's GIDs, refreshed as addresses change
	stopGIDs chan struct{}              // stops the refresher; nil while there are no links

	qpMu    sync.RWMutex
	qps     map[uint32]*QP // every QP of the host by number
	nextQPN uint32

	txErrors atomic.Uint64 // frames the workers' sends lost

	router  atomic.Pointer[Router]     // route.go; nil: the default choice
	gsi     atomic.Pointer[gsiHandler] // gsi.go; nil: QP1's datagrams are dropped
	gsiPSN  atomic.Uint32              // numbers QP1's datagrams, as a UD QP's PSNs do
	members atomic.Pointer[Members]    // members.go; nil: every source is taken
	mc      mcastTable                 // multicast groups (mcast.go)
	// mcNotify is told when a group appears or goes (mcast_groups.go).
	mcNotify atomic.Pointer[func()]
	// tenantPath is the link that carries tenants and its GIDs
	// (mcast_tenant.go); switchHosts tells another host of the switch's
	// addresses.
	tenantPath  atomic.Pointer[tenantPath]
	switchHosts atomic.Pointer[Members]
}

// WireCounters count, per link, the packets it received and those that
// reached no QP.
type WireCounters struct {
	RxPackets, RxBytes         atomic.Uint64
	Malformed, ICRC            atomic.Uint64 // undecodable; wrong ICRC
	NotOurs, UnknownQP, BadKey atomic.Uint64 // destination not ours; no such QP or wrong type/state/address; P_Key (or QP1's Q_Key)
	GSI                        atomic.Uint64 // management datagrams handed to QP1's handler
	Outsiders                  atomic.Uint64 // from outside the switch to an adapter that takes only members (members.go)
	TxErrors                   atomic.Uint64 // answers the link refused to send
}

// WireStats is a snapshot of WireCounters.
type WireStats struct {
	RxPackets, RxBytes, Malformed, ICRC, NotOurs, UnknownQP, BadKey, TxErrors uint64
	GSI, Outsiders                                                            uint64
}

// WireStats returns the counters of the link called name, or of all links
// (and the workers' send errors) for "".
func (h *Host) WireStats(name string) WireStats {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var s WireStats
	if name == "" {
		s.TxErrors = h.txErrors.Load()
	}
	for l, r := range h.receivers {
		if name != "" && l.Name() != name {
			continue
		}
		c := &r.wire
		s.RxPackets += c.RxPackets.Load()
		s.RxBytes += c.RxBytes.Load()
		s.Malformed += c.Malformed.Load()
		s.ICRC += c.ICRC.Load()
		s.NotOurs += c.NotOurs.Load()
		s.UnknownQP += c.UnknownQP.Load()
		s.BadKey += c.BadKey.Load()
		s.TxErrors += c.TxErrors.Load()
		s.GSI += c.GSI.Load()
		s.Outsiders += c.Outsiders.Load()
	}
	return s
}

// NewHost returns an empty host.
func NewHost() *Host {
	return &Host{byGID: make(map[[16]byte]*Adapter), qps: make(map[uint32]*QP), nextQPN: firstQPN}
}

func (h *Host) addQP(q *QP) uint32 {
	h.qpMu.Lock()
	defer h.qpMu.Unlock()
	for {
		n := h.nextQPN
		h.nextQPN++
		if h.nextQPN > 0xFFFFFF {
			h.nextQPN = firstQPN
		}
		if _, used := h.qps[n]; !used {
			h.qps[n] = q
			return n
		}
	}
}

func (h *Host) removeQP(q *QP) {
	h.qpMu.Lock()
	if h.qps[q.qpn] == q {
		delete(h.qps, q.qpn)
	}
	h.qpMu.Unlock()
}

// qp returns the host's QP with number qpn, or nil.
func (h *Host) qp(qpn uint32) *QP {
	h.qpMu.RLock()
	q := h.qps[qpn]
	h.qpMu.RUnlock()
	return q
}

// IsLocalGID reports whether gid belongs to an adapter of this host.
func (h *Host) IsLocalGID(gid [16]byte) bool {
	if h.AdapterByGID(gid) != nil {
		return true
	}
	if g := h.linkGIDs.Load(); g != nil {
		for _, x := range *g {
			if x == gid {
				return true
			}
		}
	}
	return false
}

// AddAdapter makes a's GIDs resolvable.
func (h *Host) AddAdapter(a *Adapter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a.host = h
	if a.Async {
		// One spinning thread for the whole host: on a machine of two cores, a
		// poller per adapter plus the applications' own polling threads would
		// be more spinners than cores, and each hand-off would cost a
		// scheduler slice instead of a cache-line transfer.
		if h.poller == nil {
			h.poller = newPoller()
		}
		a.poller = h.poller
	}
	for _, g := range a.own {
		h.byGID[g] = a
	}
}

// RemoveAdapter forgets a.
func (h *Host) RemoveAdapter(a *Adapter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range a.own {
		if h.byGID[g] == a {
			delete(h.byGID, g)
		}
	}
}

// Close stops the host's poller; every adapter must be gone.
func (h *Host) Close() {
	h.mu.Lock()
	p := h.poller
	h.poller = nil
	links := h.links
	h.links = nil
	if h.stopGIDs != nil {
		close(h.stopGIDs)
		h.stopGIDs = nil
	}
	h.mu.Unlock()
	for _, l := range links {
		l.Close()
	}
	if p != nil {
		p.stop()
	}
}

// AdapterByGID returns the local adapter that owns gid, or nil.
func (h *Host) AdapterByGID(gid [16]byte) *Adapter {
	h.mu.RLock()
	a := h.byGID[gid]
	h.mu.RUnlock()
	return a
}

// LookupQP resolves a destination (GID, QPN) to a live local QP, or nil.
func (h *Host) LookupQP(gid [16]byte, qpn uint32) *QP {
	q := h.qp(qpn)
	if q == nil || !q.adapter.OwnsGID(gid) {
		return nil
	}
	return q
}

// PeersOf returns the RC and UC QPs on this host whose destination is q.
func (h *Host) PeersOf(q *QP) []*QP {
	h.qpMu.RLock()
	all := make([]*QP, 0, len(h.qps))
	for _, p := range h.qps {
		all = append(all, p)
	}
	h.qpMu.RUnlock()
	var out []*QP
	for _, p := range all {
		if p == q || p.typ == abi.QPTypeUD {
			continue
		}
		dst, dqpn := p.destination()
		if dqpn == q.qpn && q.adapter.OwnsGID(dst) {
			out = append(out, p)
		}
	}
	return out
}
