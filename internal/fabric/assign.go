package fabric

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// What the subnet manager assigns: a switch-wide adapter identifier and a
// block of QP numbers, per adapter. QPNs are 24 bits; the adapters of one
// host share its uplinks' GIDs, so a packet's destination QPN must say which
// adapter it is for: the blocks are disjoint per host (the QPN namespace),
// and block 0 (QPNs below QPNBlock, including QP0 and QP1) stays the host's.
//
// The adapter identifier is also the adapter port's LID (a vrdma extension,
// docs/design/lid-addressing.md): identifiers are handed out lowest free
// first from 1 and never above MaxUnicastLID, so every identifier is a
// unicast LID, unique on the switch.
//
// Besides the instances' adapters, every host has its daemon's default
// instance, which is not published as an instance record (its name is the
// same on every host): the subnet manager assigns its adapters under the
// switch-wide name HostDefaultInstance(host), for every host that has a
// record, and keeps those assignments when the host's record goes (a
// daemon restarting, a lease lost) so that the host finds its LIDs again,
// as OpenSM keeps a port's LID in its guid2lid file.

// DefaultQPNBlock is the QPN block per adapter: 64 Ki QPs, 255 adapters per
// host.
const DefaultQPNBlock = 0x10000

// qpnSpace is the size of the 24-bit QPN space.
const qpnSpace = 1 << 24

// MaxUnicastLID is the highest unicast LID (0x0001-0xBFFF; 0xC000-0xFFFE
// are multicast, 0xFFFF the permissive LID): the highest adapter identifier
// the subnet manager hands out.
const MaxUnicastLID = 0xBFFF

// HostDefaultAdapters is how many adapters the default instance of every
// daemon has (vrdma0).
const HostDefaultAdapters = 1

// hostDefaultSep separates "default" from the host in HostDefaultInstance:
// a character no record name has, so the name is no instance's.
const hostDefaultSep = "@"

// HostDefaultInstance is the switch-wide name of host's default instance in
// the subnet manager's assignments: "default@<host>".
func HostDefaultInstance(host string) string { return "default" + hostDefaultSep + host }

// hostOfDefault returns the host whose default instance name is, if it is
// one.
func hostOfDefault(name string) (string, bool) {
	h, ok := strings.CutPrefix(name, "default"+hostDefaultSep)
	return h, ok && ValidateName("host", h) == nil
}

// Assignment is what the subnet manager gave one adapter.
type Assignment struct {
	Instance  string `json:"instance"`
	Index     int    `json:"index"`
	Host      string `json:"host"` // the QPN namespace
	AdapterID uint32 `json:"adapterID"`
	QPNBase   uint32 `json:"qpnBase"`
	QPNCount  uint32 `json:"qpnCount"`
}

// LID is the adapter port's LID: its identifier, or 0 if that is not a
// unicast LID (a record the subnet manager has not repaired yet).
func (a Assignment) LID() uint16 {
	if a.AdapterID == 0 || a.AdapterID > MaxUnicastLID {
		return 0
	}
	return uint16(a.AdapterID)
}

// SMConfig configures the subnet manager.
type SMConfig struct {
	// QPNBlock is the QPNs per adapter, a power of two between 0x100 and
	// 0x400000 (0: DefaultQPNBlock).
	QPNBlock uint32
}

func (c SMConfig) block() uint32 {
	if c.QPNBlock == 0 {
		return DefaultQPNBlock
	}
	return c.QPNBlock
}

// Validate checks the configuration.
func (c SMConfig) Validate() error {
	b := c.block()
	if b < 0x100 || b > qpnSpace/4 || b&(b-1) != 0 {
		return fmt.Errorf("%w: QPN block %#x; use a power of two between 0x100 and 0x400000", ErrInvalid, b)
	}
	return nil
}

// Report is what one pass of the subnet manager found and did.
type Report struct {
	Kept       int      // assignments found valid
	Assigned   int      // adapters that had none and got one
	Reassigned int      // invalid or conflicting assignments replaced
	Released   int      // assignments of adapters that no longer exist
	Problems   []string // what could not be fixed, and how to fix it
}

func (r Report) String() string {
	s := fmt.Sprintf("kept %d, assigned %d, reassigned %d, released %d", r.Kept, r.Assigned, r.Reassigned, r.Released)
	if len(r.Problems) > 0 {
		s += "; problems: " + strings.Join(r.Problems, "; ")
	}
	return s
}

// adapterRef names one adapter.
type adapterRef struct {
	inst string
	idx  int
}

// parseAssignKey splits ".../sm/assign/<instance>/<index>".
func parseAssignKey(prefix, key string) (adapterRef, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return adapterRef{}, false
	}
	inst, idx, ok := strings.Cut(rest, "/")
	if !ok {
		return adapterRef{}, false
	}
	i, err := strconv.Atoi(idx)
	if err != nil {
		return adapterRef{}, false
	}
	return adapterRef{inst, i}, true
}

// storedAssignment is an assignment as read: its key's adapter, and the
// record (ok false if it did not parse).
type storedAssignment struct {
	ref adapterRef
	a   Assignment
	ok  bool
	key string
}

// plan re-validates the current assignments against the instances and the
// hosts (the names of those with a record) and returns what to write and
// what to delete. It is a pure function: the subnet manager runs it on
// taking the role and after every change.
//
// An assignment is kept when its adapter exists on the host it names (a
// host's default instance exists once its host has had a record), its
// identifier is a unicast LID and its QPN block is well formed, and
// neither its identifier nor its block is already held by an assignment
// earlier in key order. Adapters without a kept assignment get the lowest
// free identifier and the lowest free block of their host.
func plan(instances []Instance, hosts []string, current []storedAssignment, cfg SMConfig) (puts []Assignment, dels []string, rep Report) {
	block := cfg.block()
	host := map[adapterRef]string{}
	var adapters []adapterRef
	for _, in := range instances {
		for _, a := range in.Adapters {
			r := adapterRef{in.Name, a.Index}
			host[r] = in.Host
			adapters = append(adapters, r)
		}
	}
	for _, h := range hosts {
		for i := 0; i < HostDefaultAdapters; i++ {
			r := adapterRef{HostDefaultInstance(h), i}
			if _, dup := host[r]; !dup {
				host[r] = h
				adapters = append(adapters, r)
			}
		}
	}
	// A host's default adapters stay assigned while the host has no
	// record: it comes back to the same LIDs.
	for _, s := range current {
		if h, ok := hostOfDefault(s.ref.inst); ok && s.ref.idx >= 0 && s.ref.idx < HostDefaultAdapters {
			if _, known := host[s.ref]; !known {
				host[s.ref] = h
			}
		}
	}
	sort.Slice(adapters, func(i, j int) bool {
		if adapters[i].inst != adapters[j].inst {
			return adapters[i].inst < adapters[j].inst
		}
		return adapters[i].idx < adapters[j].idx
	})
	sort.Slice(current, func(i, j int) bool { return current[i].key < current[j].key })

	type nsBlock struct {
		host string
		base uint32
	}
	usedID := map[uint32]bool{}
	usedBlock := map[nsBlock]bool{}
	kept := map[adapterRef]bool{}
	hadInvalid := map[adapterRef]bool{}
	for _, s := range current {
		h, exists := host[s.ref]
		a := s.a
		valid := s.ok && exists && !kept[s.ref] &&
			a.Instance == s.ref.inst && a.Index == s.ref.idx && a.Host == h &&
			a.AdapterID != 0 && a.AdapterID <= MaxUnicastLID && !usedID[a.AdapterID] &&
			a.QPNCount == block && a.QPNBase%block == 0 && a.QPNBase >= block &&
			uint64(a.QPNBase)+uint64(block) <= qpnSpace &&
			!usedBlock[nsBlock{h, a.QPNBase}]
		switch {
		case valid:
			kept[s.ref] = true
			usedID[a.AdapterID] = true
			usedBlock[nsBlock{h, a.QPNBase}] = true
			rep.Kept++
		case exists:
			hadInvalid[s.ref] = true // overwritten below
		default:
			dels = append(dels, s.key)
			rep.Released++
		}
	}
	nextID := uint32(1)
	for _, r := range adapters {
		if kept[r] {
			continue
		}
		h := host[r]
		for usedID[nextID] {
			nextID++
		}
		if nextID > MaxUnicastLID {
			rep.Problems = append(rep.Problems, fmt.Sprintf("no free adapter identifier for %s/vrdma%d: the switch's %d adapters hold every unicast LID (0x0001-0x%04X); delete instances", r.inst, r.idx, MaxUnicastLID, MaxUnicastLID))
			continue
		}
		base := uint32(0)
		for b := block; uint64(b)+uint64(block) <= qpnSpace; b += block {
			if !usedBlock[nsBlock{h, b}] {
				base = b
				break
			}
		}
		if base == 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("host %q has no free QPN block for %s/vrdma%d (%d adapters of %#x QPNs fill it); move instances to other hosts or lower the QPN block", h, r.inst, r.idx, qpnSpace/block-1, block))
			continue
		}
		usedID[nextID] = true
		usedBlock[nsBlock{h, base}] = true
		kept[r] = true
		puts = append(puts, Assignment{Instance: r.inst, Index: r.idx, Host: h, AdapterID: nextID, QPNBase: base, QPNCount: block})
		if hadInvalid[r] {
			rep.Reassigned++
		} else {
			rep.Assigned++
		}
	}
	// An invalid assignment whose adapter could not be given a new one is
	// deleted rather than left wrong.
	for _, s := range current {
		if hadInvalid[s.ref] && !kept[s.ref] {
			dels = append(dels, s.key)
		}
	}
	return puts, dels, rep
}
