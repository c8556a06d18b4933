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

// DefaultQPNBlock is the QPN block per adapter: 64 Ki QPs, 255 adapters per
// host.
const DefaultQPNBlock = 0x10000

// qpnSpace is the size of the 24-bit QPN space.
const qpnSpace = 1 << 24

// Assignment is what the subnet manager gave one adapter.
type Assignment struct {
	Instance  string `json:"instance"`
	Index     int    `json:"index"`
	Host      string `json:"host"` // the QPN namespace
	AdapterID uint32 `json:"adapterID"`
	QPNBase   uint32 `json:"qpnBase"`
	QPNCount  uint32 `json:"qpnCount"`
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

// plan re-validates the current assignments against the instances and
// returns what to write and what to delete. It is a pure function: the
// subnet manager runs it on taking the role and after every change.
//
// An assignment is kept when its adapter exists on the host it names, its
// QPN block is well formed, and neither its identifier nor its block is
// already held by an assignment earlier in key order. Adapters without a
// kept assignment get the lowest free identifier and the lowest free block
// of their host.
func plan(instances []Instance, current []storedAssignment, cfg SMConfig) (puts []Assignment, dels []string, rep Report) {
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
			a.AdapterID != 0 && !usedID[a.AdapterID] &&
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
