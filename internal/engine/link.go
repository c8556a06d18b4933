package engine

import (
	"fmt"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
)

// Link is an uplink as the engine sees it: RoCEv2 packets on one host
// interface (package uplink implements it on real sockets; tests wrap it to
// inject faults).
type Link interface {
	// Name is the link's name, as `vrdma link add NAME` gave it.
	Name() string
	// GIDs returns the link's current GID table in rxe's order: the fe80::
	// EUI-64 GID of the interface's MAC, then one per interface address
	// (IPv4 as ::ffff:a.b.c.d). It follows address changes.
	GIDs() [][16]byte
	// ActiveMTU is the largest IB MTU the interface carries (its MTU − 80).
	ActiveMTU() abi.MTU
	// WriteBatch sends frames, each a whole IPv4 or IPv6 packet as package
	// wire encodes it, and returns how many were sent.
	WriteBatch(frames [][]byte) (int, error)
	// Serve reads packets until Close, calling deliver with each whole IP
	// packet; the slice is valid only during the call.
	Serve(deliver func(frame []byte)) error
	// Close stops Serve and releases the sockets.
	Close() error
}

// IntactLink is a Link that may vouch for the frames it delivers: when
// FramesIntact is true, every frame is byte for byte what a peer's engine
// sent — an authenticated cipher (TLS's AEAD) covers it from that engine
// to this one — so the receiver does not check its ICRC again. Frames sent
// on it still carry their ICRC.
type IntactLink interface {
	Link
	FramesIntact() bool
}

// AddLink attaches l to the host: its GIDs become the GIDs of every adapter
// and packets it receives are delivered to the adapters' QPs.
func (h *Host) AddLink(l Link) error {
	if err := h.addLink(l); err != nil {
		return err
	}
	for _, g := range h.joinedGroups() {
		joinLink(l, g, true) // the groups QPs attached to before the link came
	}
	return nil
}

func (h *Host) addLink(l Link) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.links {
		if x.Name() == l.Name() {
			return fmt.Errorf("link %s exists already: delete it first or pick another name", l.Name())
		}
	}
	h.links = append(h.links, l)
	if h.receivers == nil {
		h.receivers = make(map[Link]*receiver)
	}
	h.receivers[l] = newReceiver(h, l)
	h.refreshGIDsLocked()
	if h.stopGIDs == nil {
		h.stopGIDs = make(chan struct{})
		go h.followGIDs(h.stopGIDs)
	}
	return nil
}

// refreshGIDsLocked recomputes the links' GID table; h.mu is held.
func (h *Host) refreshGIDsLocked() {
	h.refreshTenantPathLocked()
	var all [][16]byte
	seen := make(map[[16]byte]bool)
	// RDMA links first, in the order they came, then the TCP channel,
	// which answers for addresses an uplink may have too: one GID table
	// entry each, and an uplink's GIDs keep the indexes rxe gives them.
	for _, rdma := range []bool{true, false} {
		for _, l := range h.links {
			if (LinkPath(l) == PathRDMA) != rdma {
				continue
			}
			for _, g := range l.GIDs() {
				if !seen[g] {
					seen[g] = true
					all = append(all, g)
				}
			}
		}
	}
	if old := h.linkGIDs.Load(); old != nil && equalGIDs(*old, all) {
		return
	}
	h.linkGIDs.Store(&all)
}

func equalGIDs(a, b [][16]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// followGIDs keeps the GID table in step with the links' addresses.
func (h *Host) followGIDs(stop chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			h.mu.Lock()
			h.refreshGIDsLocked()
			h.mu.Unlock()
		}
	}
}

// RemoveLink detaches and closes the link called name.
func (h *Host) RemoveLink(name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.links {
		if x.Name() == name {
			h.links = append(h.links[:i], h.links[i+1:]...)
			delete(h.receivers, x)
			h.refreshGIDsLocked()
			return x.Close()
		}
	}
	return fmt.Errorf("no link called %s: `vrdma link show` lists them", name)
}

// Links returns the host's links.
func (h *Host) Links() []Link {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return append([]Link(nil), h.links...)
}
