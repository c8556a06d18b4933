package engine

import (
	"sync"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
)

// Host is every adapter of one daemon, indexed by GID so that a destination
// address resolves to the adapter that owns it.
type Host struct {
	mu     sync.RWMutex
	byGID  map[[16]byte]*Adapter
	pdSeq  atomic.Uint64
	poller *poller // shared by every async-mode adapter; started with the first
	links  []Link
}

// NewHost returns an empty host.
func NewHost() *Host { return &Host{byGID: make(map[[16]byte]*Adapter)} }

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
	for _, g := range a.GIDs {
		h.byGID[g] = a
	}
}

// RemoveAdapter forgets a.
func (h *Host) RemoveAdapter(a *Adapter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range a.GIDs {
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
	h.mu.Unlock()
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
	a := h.AdapterByGID(gid)
	if a == nil {
		return nil
	}
	return a.QP(qpn)
}

// PeersOf returns the RC and UC QPs on this host whose destination is q.
func (h *Host) PeersOf(q *QP) []*QP {
	h.mu.RLock()
	adapters := make(map[*Adapter]bool, len(h.byGID))
	for _, a := range h.byGID {
		adapters[a] = true
	}
	h.mu.RUnlock()
	var gids = q.adapter.GIDs
	var out []*QP
	for a := range adapters {
		for _, p := range a.QPs() {
			if p == q || p.typ == abi.QPTypeUD {
				continue
			}
			dst, dqpn := p.destination()
			if dqpn != q.qpn {
				continue
			}
			for _, g := range gids {
				if g == dst {
					out = append(out, p)
					break
				}
			}
		}
	}
	return out
}
