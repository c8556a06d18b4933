package shm

import (
	"math"
	"sync"
	"testing"
)

func region(t *testing.T, size int) []byte {
	t.Helper()
	r, err := NewRegion("shm-test", size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r.Bytes()
}

func TestLoadStoreSwap32(t *testing.T) {
	b := region(t, 4096)
	Store32(b, 64, 0x01020304)
	if got := Load32(b, 64); got != 0x01020304 {
		t.Fatalf("Load32 = %#x", got)
	}
	if old := Swap32(b, 64, 99); old != 0x01020304 {
		t.Fatalf("Swap32 returned %#x, want the old value", old)
	}
	if got := Load32(b, 64); got != 99 {
		t.Fatalf("after Swap32: %#x", got)
	}
	// The last word of the mapping is addressable.
	Store32(b, len(b)-4, math.MaxUint32)
	if got := Load32(b, len(b)-4); got != math.MaxUint32 {
		t.Fatalf("last word: %#x", got)
	}
}

func TestCompareAndSwap64(t *testing.T) {
	b := region(t, 4096)
	const off = 128
	if got := CompareAndSwap64(b, off, 0, 5); got != 0 {
		t.Fatalf("successful CAS returned %d, want old value 0", got)
	}
	if got := Load64(b, off); got != 5 {
		t.Fatalf("after CAS: %d", got)
	}
	// A failed CAS returns the value found and stores nothing.
	if got := CompareAndSwap64(b, off, 4, 9); got != 5 {
		t.Fatalf("failed CAS returned %d, want the current value 5", got)
	}
	if got := Load64(b, off); got != 5 {
		t.Fatalf("failed CAS stored: %d", got)
	}
	if got := CompareAndSwap64(b, off, 5, math.MaxUint64); got != 5 {
		t.Fatalf("CAS returned %d", got)
	}
	if got := Load64(b, off); got != math.MaxUint64 {
		t.Fatalf("after CAS: %d", got)
	}
}

func TestFetchAdd64(t *testing.T) {
	b := region(t, 4096)
	const off = 256
	if old := FetchAdd64(b, off, 10); old != 0 {
		t.Fatalf("FetchAdd64 returned %d, want 0", old)
	}
	if old := FetchAdd64(b, off, 5); old != 10 {
		t.Fatalf("FetchAdd64 returned %d, want 10", old)
	}
	if got := Load64(b, off); got != 15 {
		t.Fatalf("value %d, want 15", got)
	}
	// Adding the two's complement subtracts; the sum wraps modulo 2^64.
	if old := FetchAdd64(b, off, ^uint64(0)); old != 15 {
		t.Fatalf("FetchAdd64(-1) returned %d", old)
	}
	if got := Load64(b, off); got != 14 {
		t.Fatalf("value %d, want 14", got)
	}
	CompareAndSwap64(b, off, 14, math.MaxUint64)
	if old := FetchAdd64(b, off, 2); old != math.MaxUint64 {
		t.Fatalf("FetchAdd64 returned %d", old)
	}
	if got := Load64(b, off); got != 1 {
		t.Fatalf("wrapped value %d, want 1", got)
	}
}

func TestAtomicsConcurrent(t *testing.T) {
	b := region(t, 4096)
	const goroutines, adds = 8, 1000
	var wg sync.WaitGroup
	seen := make([]map[uint64]bool, goroutines)
	for g := 0; g < goroutines; g++ {
		seen[g] = map[uint64]bool{}
		wg.Add(1)
		go func(m map[uint64]bool) {
			defer wg.Done()
			for i := 0; i < adds; i++ {
				m[FetchAdd64(b, 0, 1)] = true
				// CAS increment loop on a second word.
				for {
					cur := Load64(b, 8)
					if CompareAndSwap64(b, 8, cur, cur+1) == cur {
						break
					}
				}
			}
		}(seen[g])
	}
	wg.Wait()
	if got := Load64(b, 0); got != goroutines*adds {
		t.Fatalf("FetchAdd64 total %d, want %d", got, goroutines*adds)
	}
	if got := Load64(b, 8); got != goroutines*adds {
		t.Fatalf("CAS total %d, want %d", got, goroutines*adds)
	}
	// Every old value FetchAdd64 returned is distinct.
	all := map[uint64]bool{}
	for _, m := range seen {
		for v := range m {
			if all[v] {
				t.Fatalf("old value %d returned twice", v)
			}
			all[v] = true
		}
	}
	if len(all) != goroutines*adds {
		t.Fatalf("%d distinct old values", len(all))
	}
}

func TestAtomicsBoundsChecked(t *testing.T) {
	b := region(t, 4096)
	for name, f := range map[string]func(){
		"Load32 past end":   func() { Load32(b, len(b)-3) },
		"Store32 past end":  func() { Store32(b, len(b)-2, 1) },
		"Swap32 past end":   func() { Swap32(b, len(b), 1) },
		"Load64 past end":   func() { Load64(b, len(b)-4) },
		"CAS64 past end":    func() { CompareAndSwap64(b, len(b)-7, 0, 1) },
		"FetchAdd past end": func() { FetchAdd64(b, len(b), 1) },
		"negative offset":   func() { Load32(b, -4) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestAlignedAndAddr(t *testing.T) {
	b := region(t, 4096)
	for off := 0; off < 16; off++ {
		if got, want := Aligned8(b, off), off%8 == 0; got != want {
			t.Errorf("Aligned8(%d) = %v", off, got)
		}
	}
	if Addr(nil) != 0 || Addr(b[:0]) != 0 {
		t.Error("Addr of an empty slice is not 0")
	}
	if Addr(b[8:]) != Addr(b)+8 {
		t.Error("Addr does not follow the slice")
	}
}
