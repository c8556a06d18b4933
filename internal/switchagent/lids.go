package switchagent

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pathsel"
)

// LIDs: every adapter port of the switch has one, the identifier the
// subnet manager assigned it (package fabric). The agent follows the
// assignments: this host's adapters take their LIDs from them (LocalLID,
// the daemon asks after Host.LIDsChanged), and an address vector that
// names a port by LID alone — what InfiniBand programs such as qperf send
// — resolves to a GID of the port's host (ResolveLID).
// docs/design/lid-addressing.md.

// ErrUnknownLID is the error of a LID no port of the switch has.
var ErrUnknownLID = errors.New("switch: unknown LID")

// ErrUnreachableLID is the error of a LID whose port is on a host that is
// not on the switch now, or that announces no GID this host routes to.
var ErrUnreachableLID = errors.New("switch: the port of the LID is not reachable")

// lidTable is the switch's LIDs, replaced whole on every change.
type lidTable struct {
	byLID map[uint16]fabric.Assignment
	local map[adapterKey]uint16 // this host's adapters
}

// adapterKey names an adapter by its switch-wide instance name (a host's
// default instance: fabric.HostDefaultInstance) and index.
type adapterKey struct {
	instance string
	index    int
}

// newLIDTable builds the table of a set of assignments for host self. A
// LID that two assignments claim (a record edited by hand, until the
// subnet manager repairs it) is nobody's.
func newLIDTable(set []fabric.Assignment, self string) *lidTable {
	t := &lidTable{byLID: map[uint16]fabric.Assignment{}, local: map[adapterKey]uint16{}}
	contested := map[uint16]bool{}
	for _, a := range set {
		lid := a.LID()
		if lid == 0 || contested[lid] {
			continue
		}
		if _, dup := t.byLID[lid]; dup {
			delete(t.byLID, lid)
			contested[lid] = true
			continue
		}
		t.byLID[lid] = a
	}
	for lid, a := range t.byLID {
		if a.Host == self {
			t.local[adapterKey{a.Instance, a.Index}] = lid
		}
	}
	return t
}

// followLIDs keeps the LID table current and tells the daemon when it
// changes.
func (a *Agent) followLIDs(ch <-chan []fabric.Assignment) {
	defer a.wg.Done()
	for set := range ch {
		a.lids.Store(newLIDTable(set, a.hostName))
		a.host.LIDsChanged()
	}
}

// LocalLID is the LID of this host's adapter index of the instance called
// instance on the switch (its default instance: fabric.HostDefaultInstance
// of this host), 0 while the subnet manager has assigned it none.
func (a *Agent) LocalLID(instance string, index int) uint16 {
	t := a.lids.Load()
	if t == nil {
		return 0
	}
	return t.local[adapterKey{instance, index}]
}

// ResolveLID returns the GID a QP whose source GID is sgid reaches the port
// with LID lid at, on another host of the switch: the first GID of that
// host's (its uplinks', then its TCP channel's, as its adapters' GID tables
// list them) that this host routes to, of sgid's family (IPv4 or IPv6) if
// it has one. The error wraps ErrUnknownLID or ErrUnreachableLID. The
// daemon looks up its own adapters' LIDs first: one of this host's here is
// unknown (an assignment of an adapter that is gone).
func (a *Agent) ResolveLID(lid uint16, sgid [16]byte) ([16]byte, error) {
	var none [16]byte
	t := a.lids.Load()
	var asg fabric.Assignment
	ok := false
	if t != nil {
		asg, ok = t.byLID[lid]
	}
	if !ok || asg.Host == a.hostName {
		return none, fmt.Errorf("%w: no port with LID 0x%x on the switch", ErrUnknownLID, lid)
	}
	a.mu.Lock()
	h, live := a.hosts[asg.Host]
	a.mu.Unlock()
	if !live {
		return none, fmt.Errorf("%w: the port with LID 0x%x (%s/vrdma%d) is on host %s, which is not on the switch now: is its daemon running?", ErrUnreachableLID, lid, asg.Instance, asg.Index, asg.Host)
	}
	g, ok := a.portGID(h, sgid)
	if !ok {
		return none, fmt.Errorf("%w: the port with LID 0x%x is on host %s, which announces no address this host routes to (`vrdma switch show` and the daemon's log say why)", ErrUnreachableLID, lid, asg.Host)
	}
	a.log.Debug("switch: LID resolved", "lid", lid, "host", asg.Host, "gid", netip.AddrFrom16(g), slog.String("port", fmt.Sprintf("%s/vrdma%d", asg.Instance, asg.Index)))
	return g, nil
}

// portGID picks the destination GID for a port of host h: see ResolveLID.
func (a *Agent) portGID(h fabric.Host, sgid [16]byte) ([16]byte, bool) {
	rt := a.routes.Load()
	want4 := netip.AddrFrom16(sgid).Is4In6()
	var first [16]byte
	found := false
	for _, g := range tableGIDs(h) {
		pr := rt.byGID[g]
		if pr == nil || pr.host != h.Name || !rt.carries(pr, sgid) {
			continue
		}
		if netip.AddrFrom16(g).Is4In6() == want4 {
			return g, true
		}
		if !found {
			first, found = g, true
		}
	}
	return first, found
}

// carries reports whether a packet from sgid to an address pr routes to
// would reach it: over an RDMA uplink, or over the TCP channel, which
// connects only to addresses that name their host (not to unproven ones).
func (rt *routeTable) carries(pr *peerRoute, sgid [16]byte) bool {
	if pr.choice.Kind == pathsel.RDMA && pr.viaRDMA && rt.rdma[sgid] != nil {
		return true
	}
	return !pr.unproven
}

// tableGIDs lists a host's GIDs in the order its adapters' GID tables list
// them: its RDMA uplinks' (those up, in the record's order), then the
// addresses its TCP channel answers for, each once.
func tableGIDs(h fabric.Host) [][16]byte {
	var out [][16]byte
	seen := map[[16]byte]bool{}
	add := func(s string) {
		if ip, err := netip.ParseAddr(s); err == nil {
			if g := ip.As16(); !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	for _, u := range h.Uplinks {
		if u.Kind == fabric.UplinkRXE && u.State != fabric.UplinkDown {
			for _, g := range u.GIDs {
				add(g)
			}
		}
	}
	for _, s := range h.Addrs {
		add(s)
	}
	return out
}
