package engine

// What the host's groups are, for the switch's record of them
// (docs/design/multicast.md, "The switch's record").

import (
	"bytes"
	"sort"
)

// McastGroup is one group of the host: a tenant's (scope's) MGID and how
// many of its QPs are attached.
type McastGroup struct {
	Scope string
	MGID  [16]byte
	QPs   int
}

// McastGroups returns the host's groups, sorted by scope then MGID.
func (h *Host) McastGroups() []McastGroup {
	t := &h.mc
	t.mu.Lock()
	out := make([]McastGroup, 0, len(t.groups))
	for k, qs := range t.groups {
		out = append(out, McastGroup{Scope: k.scope, MGID: k.mgid, QPs: len(qs)})
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Scope != out[j].Scope {
			return out[i].Scope < out[j].Scope
		}
		return bytes.Compare(out[i].MGID[:], out[j].MGID[:]) < 0
	})
	return out
}

// SetMcastNotify installs f (nil: none), called after a group of the host
// gets its first QP or loses its last, holding no lock of the engine's.
// It must not block: the switch agent only wakes its writer.
func (h *Host) SetMcastNotify(f func()) {
	if f == nil {
		h.mcNotify.Store(nil)
		return
	}
	h.mcNotify.Store(&f)
}

// mcastChanged calls the notify function, if any.
func (h *Host) mcastChanged() {
	if f := h.mcNotify.Load(); f != nil {
		(*f)()
	}
}
