package daemon

import (
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/switchagent"
)

// The adapters' LIDs and the address vectors that name a port by LID
// alone (docs/design/lid-addressing.md). On a switch an adapter's LID is
// the identifier the subnet manager assigned it, which the agent follows;
// on no switch the daemon gives the lowest LID free on the host, and saves
// it with the instance so that it survives a restart.

// lidWait bounds how long creating an instance, or joining the switch,
// waits for the subnet manager's LIDs: past it the adapters work, and
// report LID 0 until their LIDs come.
const lidWait = 10 * time.Second

// lidTable gives the adapters their LIDs and finds adapters by LID: on a
// switch from the subnet manager's assignments, on none itself
// (giveLocked), from the daemon's first LID (identity.go).
type lidTable struct {
	mu    *sync.Mutex    // the daemon's: guards changed and the instances
	insts *instanceTable // whose adapters have the LIDs
	sw    *switchMember  // the switch's agent (nil on no switch) assigns them
	cfg   *Config        // the host's name, whether it is on a switch, LID routing
	log   *slog.Logger
	first uint16 // the lowest LID given on no switch
	// changed is closed, and replaced, when adapters' LIDs change.
	changed chan struct{}
}

// switchName is inst's name on the switch: the default instance, which
// every daemon has, is fabric.HostDefaultInstance of this host.
func (l *lidTable) switchName(inst *Instance) string {
	if inst.shared {
		return fabric.HostDefaultInstance(l.cfg.HostName)
	}
	return inst.Name
}

// changedLocked wakes the waiters of await (d.mu).
func (l *lidTable) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// giveLocked gives a new instance's adapters their LIDs on a daemon
// with no switch (d.mu): want's where they are valid and free, else the
// lowest free ones from the daemon's first LID (identity.go). On a switch
// they come from the subnet manager (switchChanged).
func (l *lidTable) giveLocked(inst *Instance, want []uint16) {
	if l.cfg.Switch.Enable {
		return
	}
	used := map[uint16]bool{}
	for _, other := range l.insts.m {
		for _, a := range other.Adapters {
			used[a.LID()] = true
		}
	}
	next := l.first
	for i, a := range inst.Adapters {
		if i < len(want) && want[i] != 0 && want[i] <= fabric.MaxUnicastLID && !used[want[i]] {
			a.SetLID(want[i])
			used[want[i]] = true
			continue
		}
		for used[next] && next <= fabric.MaxUnicastLID {
			next++
		}
		if next > fabric.MaxUnicastLID {
			l.log.Warn("no LID left on this host: the adapter has none", "instance", inst.Name, "adapter", a.Name)
			continue
		}
		a.SetLID(next)
		used[next] = true
	}
}

// switchChanged is the agent's Host.LIDsChanged, and what a new
// instance on a switch calls once published: every adapter takes the LID
// the switch has for it now. The agent is asked holding none of the
// daemon's locks.
func (l *lidTable) switchChanged() {
	if l.sw.agent == nil {
		return
	}
	type named struct {
		name string // the instance's name on the switch
		a    *engine.Adapter
	}
	l.mu.Lock()
	var all []named
	for _, inst := range l.insts.m {
		name := l.switchName(inst)
		for _, a := range inst.Adapters {
			all = append(all, named{name, a})
		}
	}
	l.mu.Unlock()
	lids := make([]uint16, len(all))
	for i, n := range all {
		lids[i] = l.sw.agent.LocalLID(n.name, n.a.Index)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := false
	for i, n := range all {
		if n.a.LID() != lids[i] {
			n.a.SetLID(lids[i])
			changed = true
		}
	}
	if changed {
		l.changedLocked()
	}
}

// await waits until every adapter of insts has a LID, for at most
// timeout, and reports whether they have.
func (l *lidTable) await(insts []*Instance, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		all := true
		for _, inst := range insts {
			for _, a := range inst.Adapters {
				all = all && a.LID() != 0
			}
		}
		changed := l.changed
		l.mu.Unlock()
		if all {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// awaitSwitch waits, on a switch, for insts' LIDs (lidWait at most),
// and logs when they have not come.
func (l *lidTable) awaitSwitch(insts ...*Instance) {
	if l.sw.agent == nil || l.await(insts, lidWait) {
		return
	}
	names := make([]string, len(insts))
	for i, inst := range insts {
		names[i] = inst.Name
	}
	l.log.Warn("the switch's subnet manager has not assigned the adapters' LIDs yet: they report LID 0 until it does (is a subnet manager elected? `vrdma switch show`)", "instances", names)
}

// adapterByLID returns this host's adapter whose port has LID lid, or nil.
func (l *lidTable) adapterByLID(lid uint16) *engine.Adapter {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, inst := range l.insts.m {
		for _, a := range inst.Adapters {
			if a.LID() == lid {
				return a
			}
		}
	}
	return nil
}

// resolveDLID checks that an address vector names its destination as a
// RoCE port needs, by a GRH's DGID, and gives one that names it by LID
// alone (a zero DGID, a non-zero DLID) the GID of that port: an adapter of
// this host, or, on a switch, of another host. From there the request goes
// on exactly as if the program had given that GID. An address vector with
// a DGID is left as it is; one without is refused, as rdma_rxe refuses
// it, unless the port routes by LID (lidRouting: the daemon's
// --lid-routing or the instance's) and it has a DLID. src is the adapter
// whose GID table av's sgid_index is in; code is the error's code.
func (l *lidTable) resolveDLID(src *engine.Adapter, lidRouting bool, av *qpstate.AddressVector, code proto.Code) error {
	if av.DGID != ([16]byte{}) {
		return nil
	}
	lid := av.DLID
	switch {
	case lid == 0:
		return proto.Errorf(code, "the address vector has no GRH: a RoCE port needs one (is_global=1 and the destination's GID in grh.dgid)")
	case !lidRouting && !l.cfg.LIDRouting:
		return proto.Errorf(code, "the address vector names LID 0x%x without a GRH: a RoCE port needs one (is_global=1 and the destination's GID in grh.dgid), "+
			"unless it is configured for LID routing (vrdma vm create --lid-routing; vrdma daemon --lid-routing for every port)", lid)
	}
	if lid > fabric.MaxUnicastLID {
		return proto.Errorf(code, "DLID 0x%x is not a unicast LID (0x0001-0x%04X): vrdma addresses multicast groups by GID; give the group's GID with a GRH (is_global=1)", lid, fabric.MaxUnicastLID)
	}
	gids := src.GIDs()
	if int(av.SGIDIndex) >= len(gids) {
		return nil // the sgid_index check refuses it, as for any address vector
	}
	sgid := gids[av.SGIDIndex]
	if a := l.adapterByLID(lid); a != nil {
		av.DGID = sameFamily(a.GIDs(), sgid)
		return nil
	}
	if l.sw.agent == nil {
		return proto.Errorf(code, "no port with LID 0x%x on this host (the daemon is on no switch, so its LIDs are its own adapters'): `vrdma devinfo` shows each port's LID", lid)
	}
	g, err := l.sw.agent.ResolveLID(lid, sgid)
	switch {
	case err == nil:
		av.DGID = g
		return nil
	case errors.Is(err, switchagent.ErrUnknownLID):
		return proto.Errorf(code, "no port with LID 0x%x on the switch: `vrdma devinfo` on the peer's host shows its port's LID", lid)
	default:
		return proto.Errorf(code, "DLID 0x%x: %v", lid, err)
	}
}

// sameFamily returns the first GID of table of sgid's family (IPv4 or
// IPv6), or the first GID.
func sameFamily(table [][16]byte, sgid [16]byte) [16]byte {
	if len(table) == 0 {
		return [16]byte{}
	}
	want4 := netip.AddrFrom16(sgid).Is4In6()
	for _, g := range table {
		if netip.AddrFrom16(g).Is4In6() == want4 {
			return g
		}
	}
	return table[0]
}

// lidRouting reports whether the session's instance is configured for
// LID routing.
func (s *session) lidRouting() bool {
	inst := s.inst.Load()
	return inst != nil && inst.LIDRouting
}
