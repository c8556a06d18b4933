package engine

import (
	"net/netip"

	"github.com/vrdma/vrdma/internal/abi"
)

// Path kinds a connection's packets can take off the host (the memcpy path
// never reaches a link).
const (
	PathRDMA = "rdma" // RoCEv2 on an uplink
	PathTCP  = "tcp"  // IBTA packets framed over the TCP channel
)

// Route is the link that carries packets to a destination, and its path.
type Route struct {
	Link Link
	Path string // PathRDMA or PathTCP
}

// A Router chooses the link for packets from sgid (one of the adapter's
// GIDs) to dgid, a GID of another host. ok false leaves the choice to the
// default: the first RDMA link whose GID table holds sgid, else any link
// that holds it. The distributed switch installs one (DESIGN.md's path
// table); it must be quick and must not block: UD asks it per datagram.
type Router func(sgid, dgid [16]byte) (r Route, ok bool)

// pathKinder is implemented by links that are not RDMA uplinks.
type pathKinder interface{ PathKind() string }

// LinkPath returns the path kind of packets sent on l.
func LinkPath(l Link) string {
	if k, ok := l.(pathKinder); ok {
		return k.PathKind()
	}
	return PathRDMA
}

// SetRouter installs r (nil: the default choice) for connections set up
// from now on and for every UD datagram.
func (h *Host) SetRouter(r Router) {
	if r == nil {
		h.router.Store(nil)
		return
	}
	h.router.Store(&r)
}

// route returns the link for packets from sgid to dgid, or nil.
func (h *Host) route(sgid, dgid [16]byte) (Link, string) {
	if r := h.router.Load(); r != nil {
		if rt, ok := (*r)(sgid, dgid); ok && rt.Link != nil {
			return rt.Link, rt.Path
		}
	}
	l := h.linkFor(sgid)
	if l == nil {
		return nil, ""
	}
	return l, LinkPath(l)
}

// linkFor returns the link whose GID table holds gid, an RDMA link first.
func (h *Host) linkFor(gid [16]byte) Link {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var other Link
	for _, l := range h.links {
		for _, g := range l.GIDs() {
			if g != gid {
				continue
			}
			if LinkPath(l) == PathRDMA {
				return l
			}
			if other == nil {
				other = l
			}
		}
	}
	return other
}

// FailPeers moves every connected QP whose peer address gone reports true
// to the error state with a QP_FATAL event naming reason (a host that left
// the switch: DESIGN.md). It returns how many QPs it failed.
func (h *Host) FailPeers(gone func(netip.Addr) bool, reason string) int {
	h.qpMu.RLock()
	qps := make([]*QP, 0, len(h.qps))
	for _, q := range h.qps {
		qps = append(qps, q)
	}
	h.qpMu.RUnlock()
	n := 0
	for _, q := range qps {
		q.procMu.Lock()
		rm := q.rm
		hit := rm != nil && rm.wired && rm.path.dst.IsValid() && gone(rm.path.dst)
		q.procMu.Unlock()
		if hit && abi.QPState(q.state.Load()) != abi.QPStateErr {
			q.Fail(abi.EventQPFatal, reason)
			n++
		}
	}
	return n
}
