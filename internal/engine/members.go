package engine

// Membership on RoCEv2. On a switch with certificates the switch agent
// installs the set of addresses its member hosts publish; a packet from
// any other address reaches only an adapter that accepts native endpoints
// from outside the switch (Adapter.NativeEndpoint, `--native-endpoints`).
// The rest are dropped and counted (WireCounters.Outsiders). Without a set
// (no switch, or no certificates) every source is taken, as rxe does.
// docs/design/native-endpoints.md says why.

// Members reports whether gid is an address a member host of the switch
// publishes. It is called per packet: it must be quick, must not block and
// must not allocate (a lookup in a table replaced whole).
type Members func(gid [16]byte) bool

// SetMembers installs f (nil: every source is taken).
func (h *Host) SetMembers(f Members) {
	if f == nil {
		h.members.Store(nil)
		return
	}
	h.members.Store(&f)
}

// IsOutsider reports whether gid is the source of a packet from outside
// the switch: a set of members is installed, gid is not in it, and it is
// not one of this host's own addresses.
func (h *Host) IsOutsider(gid [16]byte) bool {
	f := h.members.Load()
	return f != nil && !(*f)(gid) && !h.isLinkGID(gid)
}
