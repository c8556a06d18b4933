package engine

import (
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
