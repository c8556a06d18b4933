package engine

import (
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
)

// mrTable maps memory keys to an adapter's live regions. A key is
// index<<8 | tag, and no key value is ever handed out twice, so a mapping
// cached under a dead key can never be taken for a later region.
//
// The table has a power-of-two number of slots, and a key's slot is its
// index modulo that number. Each slot hands out one index at a time with
// successive tags (the first one random); once its tags have gone round,
// the slot moves on to its index plus the table's size, which no other
// slot ever uses (all its indices are congruent to it). So the table grows
// only when every slot holds a live region: it is as large as the most
// regions ever live at once, rounded up to a power of two, however many
// registrations came and went. Growing doubles it: each live region goes
// to the slot of its index modulo the new size (two live indices, apart
// modulo the old size, are apart modulo the new), and of each pair of new
// slots that shared an old one, the one without the old slot's index starts
// above it, above everything the old slot ever used.
//
// Lookups take no lock: they load the slot array and one slot. Registering
// and deregistering store one slot; only growth copies, and it keeps the
// arrays it replaced so that deregistration clears a region from them too:
// a lookup that loaded an old array still never finds a region once it is
// deregistered.
type mrTable struct {
	slots atomic.Pointer[[]atomic.Pointer[MR]]

	mu   sync.Mutex
	meta []mrSlot
	free []uint32                // slots without a live region; popped from the end
	old  []*[]atomic.Pointer[MR] // the arrays growth replaced
	live int
}

// mrSlot is what a slot hands out: its current index, and the tags it has
// given with it.
type mrSlot struct {
	idx         uint32 // congruent to the slot modulo the table's size
	first, last uint8
	used        bool // idx has given a tag
}

const (
	mrTableStart = 4         // slots at first
	maxKeyIndex  = 1<<24 - 1 // a key's index has 24 bits
)

func (t *mrTable) init() {
	t.meta = make([]mrSlot, mrTableStart)
	slots := make([]atomic.Pointer[MR], mrTableStart)
	for s := range t.meta {
		t.meta[s].idx = uint32(s)
	}
	t.meta[0].idx = mrTableStart // index 0 is never used: key 0 is invalid
	t.rebuildFree(slots)
	t.slots.Store(&slots)
}

// add gives mr a key and publishes it. name names the adapter in errors.
func (t *mrTable) add(mr *MR, name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live >= MaxMR {
		return fmt.Errorf("adapter %s has %d memory regions, its limit: deregister unused regions", name, MaxMR)
	}
	for {
		n := len(t.free)
		if n == 0 {
			if !t.grow() {
				return fmt.Errorf("adapter %s has used up its memory keys: restart the daemon", name)
			}
			continue
		}
		s := t.free[n-1]
		t.free = t.free[:n-1]
		key, ok := t.next(s)
		if !ok {
			continue // the slot's indices are used up: it stays out of the free list
		}
		mr.key = key
		(*t.slots.Load())[s].Store(mr)
		t.live++
		return nil
	}
}

// next takes the next key of slot s, moving it to its next index when its
// tags have gone round; false when the slot has no index left.
func (t *mrTable) next(s uint32) (uint32, bool) {
	m := &t.meta[s]
	switch {
	case m.used && m.last+1 != m.first:
		m.last++
	default:
		if m.used {
			m.idx += uint32(len(t.meta))
		}
		if m.idx > maxKeyIndex {
			m.used = false
			return 0, false
		}
		var b [1]byte
		_, _ = rand.Read(b[:])
		m.first, m.last, m.used = b[0], b[0], true
	}
	return m.idx<<8 | uint32(m.last), true
}

// grow doubles the table; false when it cannot (every index is used up).
func (t *mrTable) grow() bool {
	n := uint32(len(t.meta))
	fresh := false // a new slot would have an index left
	for s := range n {
		fresh = fresh || t.meta[s].idx+n <= maxKeyIndex
	}
	if !fresh {
		return false
	}
	cur := t.slots.Load()
	slots := make([]atomic.Pointer[MR], 2*n)
	meta := make([]mrSlot, 2*n)
	for s := range n {
		m := t.meta[s]
		p := m.idx & (2*n - 1) // s or s+n
		meta[p] = m
		meta[p^n] = mrSlot{idx: m.idx + n}
		if mr := (*cur)[s].Load(); mr != nil {
			slots[p].Store(mr)
		}
	}
	t.meta = meta
	t.old = append(t.old, cur)
	t.rebuildFree(slots)
	t.slots.Store(&slots)
	return true
}

// rebuildFree lists the slots of slots without a region, the lowest last
// (popped first).
func (t *mrTable) rebuildFree(slots []atomic.Pointer[MR]) {
	t.free = t.free[:0]
	for s := len(slots) - 1; s >= 0; s-- {
		if slots[s].Load() == nil {
			t.free = append(t.free, uint32(s))
		}
	}
}

// remove unpublishes mr, from the arrays growth replaced too.
func (t *mrTable) remove(mr *MR) {
	t.mu.Lock()
	defer t.mu.Unlock()
	slots := *t.slots.Load()
	s := (mr.key >> 8) & uint32(len(slots)-1)
	if !slots[s].CompareAndSwap(mr, nil) {
		return
	}
	for _, o := range t.old {
		(*o)[(mr.key>>8)&uint32(len(*o)-1)].CompareAndSwap(mr, nil)
	}
	t.free = append(t.free, s)
	t.live--
}

// replace puts n in old's slot under old's key (n.key is old.key): a
// lookup finds one or the other. False when old is not live.
func (t *mrTable) replace(old, n *MR) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	slots := *t.slots.Load()
	if !slots[(old.key>>8)&uint32(len(slots)-1)].CompareAndSwap(old, n) {
		return false
	}
	for _, o := range t.old {
		(*o)[(old.key>>8)&uint32(len(*o)-1)].CompareAndSwap(old, n)
	}
	return true
}

// lookup returns the live region with this exact key, or nil.
func (t *mrTable) lookup(key uint32) *MR {
	slots := *t.slots.Load()
	mr := slots[(key>>8)&uint32(len(slots)-1)].Load()
	if mr == nil || mr.key != key {
		return nil
	}
	return mr
}

// count returns how many regions are live.
func (t *mrTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}
