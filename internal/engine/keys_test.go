package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
)

// TestMemoryKeysNeverRepeat registers and deregisters one region after
// another, more often than a key's tag can count, and checks that no key
// value comes back: a mapping cached under a dead key can never be taken
// for a live region.
func TestMemoryKeysNeverRepeat(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 1}, false)
	pd := a.NewPD()
	seen := map[uint32]bool{}
	for i := 0; i < 1000; i++ {
		r, err := shm.NewRegion("t", 4096)
		if err != nil {
			t.Fatal(err)
		}
		mr, err := RegisterMR(pd, r, shm.Addr(r.Bytes()), 4096, abi.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		if seen[mr.Key()] {
			t.Fatalf("key 0x%x handed out twice (registration %d)", mr.Key(), i)
		}
		seen[mr.Key()] = true
		if a.lookupMR(mr.Key()) != mr {
			t.Fatalf("key 0x%x does not find its region", mr.Key())
		}
		mr.Deregister()
		if a.lookupMR(mr.Key()) != nil {
			t.Fatalf("key 0x%x still finds a region after deregistration", mr.Key())
		}
	}
	if a.NumMRs() != 0 {
		t.Fatalf("%d regions left", a.NumMRs())
	}
}

// TestTrust: the adapters of one instance trust each other, those of
// instances in one trust group too, others not.
func TestTrust(t *testing.T) {
	mk := func(inst, group string) *Adapter {
		a := NewAdapter(inst, "vrdma0", 0, [6]byte{2, 1}, false)
		a.TrustGroup = group
		return a
	}
	tests := []struct {
		a, b *Adapter
		want bool
	}{
		{mk("x", ""), mk("x", ""), true},
		{mk("x", ""), mk("y", ""), false},
		{mk("x", "g"), mk("y", "g"), true},
		{mk("x", "g"), mk("y", "h"), false},
		{mk("x", "g"), mk("y", ""), false},
	}
	for i, tt := range tests {
		if got := tt.a.Trusts(tt.b); got != tt.want || tt.b.Trusts(tt.a) != tt.want {
			t.Errorf("case %d: Trusts = %v, want %v (both ways)", i, got, tt.want)
		}
	}
}

// TestMemoryRegionTableFollowsLiveRegions: registering and deregistering
// one region over and over, many times more than a key's tag can count,
// next to a few that stay, leaves the table the size of the most regions
// ever live at once (rounded up), not one entry more per 256 cycles; no key
// comes back, and every live key finds its region throughout.
func TestMemoryRegionTableFollowsLiveRegions(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 1}, false)
	pd := a.NewPD()
	reg := func() *MR {
		r, err := shm.NewRegion("t", 4096)
		if err != nil {
			t.Fatal(err)
		}
		mr, err := RegisterMR(pd, r, shm.Addr(r.Bytes()), 4096, abi.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		return mr
	}
	stay := []*MR{reg(), reg(), reg()}
	seen := map[uint32]bool{}
	for _, m := range stay {
		seen[m.Key()] = true
	}
	const cycles = 256 * 40
	for i := 0; i < cycles; i++ {
		mr := reg()
		if seen[mr.Key()] {
			t.Fatalf("key 0x%x handed out twice (cycle %d)", mr.Key(), i)
		}
		seen[mr.Key()] = true
		if a.lookupMR(mr.Key()) != mr {
			t.Fatalf("cycle %d: key 0x%x does not find its region", i, mr.Key())
		}
		mr.Deregister()
	}
	for _, m := range stay {
		if a.lookupMR(m.Key()) != m {
			t.Fatalf("key 0x%x, live throughout, does not find its region", m.Key())
		}
		m.Deregister()
	}
	if n := mrTableLen(a); n > 8 {
		t.Fatalf("after %d cycles with at most 4 regions live the table has %d entries", cycles, n)
	}
}

// TestMemoryRegionTableGrows: many regions live at once, some given back
// and others taken while the table grows: every live key finds its region,
// every dead one nothing, and no key repeats.
func TestMemoryRegionTableGrows(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 1}, false)
	pd := a.NewPD()
	live := map[uint32]*MR{}
	var dead []uint32
	seen := map[uint32]bool{}
	for i := 0; i < 3000; i++ {
		mr := &MR{pd: pd}
		if err := a.addMR(mr); err != nil {
			t.Fatal(err)
		}
		if seen[mr.key] || mr.key == 0 {
			t.Fatalf("key 0x%x handed out twice, or zero (registration %d)", mr.key, i)
		}
		seen[mr.key] = true
		live[mr.key] = mr
		if i%3 == 2 { // give one back every third
			for k, m := range live {
				a.removeMR(m)
				delete(live, k)
				dead = append(dead, k)
				break
			}
		}
	}
	for k, m := range live {
		if a.lookupMR(k) != m {
			t.Fatalf("live key 0x%x does not find its region", k)
		}
	}
	for _, k := range dead {
		if a.lookupMR(k) != nil {
			t.Fatalf("dead key 0x%x finds a region", k)
		}
	}
	if a.NumMRs() != len(live) {
		t.Fatalf("NumMRs %d, %d live", a.NumMRs(), len(live))
	}
	if n := mrTableLen(a); n > 4096 {
		t.Fatalf("%d entries for at most %d live", n, 2000)
	}
}

// BenchmarkRegisterWithManyLive: the table's part of registering and
// deregistering a region while 10,000 others are live.
func BenchmarkRegisterWithManyLive(b *testing.B) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 1}, false)
	pd := a.NewPD()
	for i := 0; i < 10000; i++ {
		if err := a.addMR(&MR{pd: pd}); err != nil {
			b.Fatal(err)
		}
	}
	mr := &MR{pd: pd}
	b.ReportAllocs()
	for b.Loop() {
		if err := a.addMR(mr); err != nil {
			b.Fatal(err)
		}
		a.removeMR(mr)
	}
}

// BenchmarkLookupMR: the data path's key lookup.
func BenchmarkLookupMR(b *testing.B) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 1}, false)
	pd := a.NewPD()
	var keys []uint32
	for i := 0; i < 1000; i++ {
		mr := &MR{pd: pd}
		if err := a.addMR(mr); err != nil {
			b.Fatal(err)
		}
		keys = append(keys, mr.key)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if a.lookupMR(keys[i%len(keys)]) == nil {
			b.Fatal("lost a key")
		}
		i++
	}
}

func mrTableLen(a *Adapter) int { return len(*a.mrs.slots.Load()) }

// TestMemoryKeysRunOut: an adapter whose key indices are all but used up
// hands out what is left, each key once, and then refuses with an error
// that says what to do, without growing its table for nothing.
func TestMemoryKeysRunOut(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 1}, false)
	pd := a.NewPD()
	for s := range a.mrs.meta {
		a.mrs.meta[s].idx = maxKeyIndex + 1 - mrTableStart + uint32(s) // each slot's last index
	}
	seen := map[uint32]bool{}
	var err error
	for i := 0; i < 2*mrTableStart*256; i++ {
		mr := &MR{pd: pd}
		if err = a.addMR(mr); err != nil {
			if i != mrTableStart*256 {
				t.Fatalf("keys ran out after %d registrations, want %d: %v", i, mrTableStart*256, err)
			}
			break
		}
		if seen[mr.key] || mr.key>>8 < maxKeyIndex+1-mrTableStart {
			t.Fatalf("key 0x%x handed out twice, or below the indices left", mr.key)
		}
		seen[mr.key] = true
		a.removeMR(mr)
	}
	if err == nil || !strings.Contains(err.Error(), "used up its memory keys") {
		t.Fatalf("after every key was used: %v", err)
	}
	if n := mrTableLen(a); n != mrTableStart {
		t.Fatalf("the table grew to %d slots with no key to give", n)
	}
}

// TestDeregisteredRegionLeavesOldTables: a lookup that loaded the table's
// slots before it grew finds no region once that region is deregistered.
func TestDeregisteredRegionLeavesOldTables(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 1}, false)
	pd := a.NewPD()
	first := &MR{pd: pd}
	if err := a.addMR(first); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < mrTableStart; i++ {
		if err := a.addMR(&MR{pd: pd}); err != nil {
			t.Fatal(err)
		}
	}
	stale := *a.mrs.slots.Load()
	if err := a.addMR(&MR{pd: pd}); err != nil { // grows the table
		t.Fatal(err)
	}
	if mrTableLen(a) == len(stale) {
		t.Fatal("the table did not grow: the test needs it to")
	}
	a.removeMR(first)
	if mr := stale[(first.key>>8)&uint32(len(stale)-1)].Load(); mr != nil {
		t.Fatalf("the table from before the growth still holds region 0x%x", mr.key)
	}
}

// TestMemoryRegionTableConcurrentLookups: lookups, which take no lock, run
// while regions come and go and the table grows; a live key always finds
// its region (run under -race).
func TestMemoryRegionTableConcurrentLookups(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 1}, false)
	pd := a.NewPD()
	keep := &MR{pd: pd}
	if err := a.addMR(keep); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if a.lookupMR(keep.key) != keep {
				done <- fmt.Errorf("live key 0x%x lost its region", keep.key)
				return
			}
		}
	}()
	var held []*MR
	for i := 0; i < 5000; i++ {
		mr := &MR{pd: pd}
		if err := a.addMR(mr); err != nil {
			t.Fatal(err)
		}
		held = append(held, mr)
		if i%2 == 1 {
			a.removeMR(held[0])
			held = held[1:]
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
