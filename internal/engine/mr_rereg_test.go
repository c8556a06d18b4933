package engine

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
)

func testRegion(t *testing.T, size int) *shm.Region {
	t.Helper()
	r, err := shm.NewRegion("t", size)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReregisterKeepsKey: a re-registered region is found under the old
// key with its new memory, PD and access, while the old one is retired
// (no longer acquirable); the table holds one region. A re-registration
// that fails (bad access, a dead region, another adapter's PD) leaves the
// old region in place.
func TestReregisterKeepsKey(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 1}, false)
	b := NewAdapter("i", "vrdma1", 1, [6]byte{2, 0, 0, 0, 0, 2}, false)
	pd, pd2 := a.NewPD(), a.NewPD()
	r := testRegion(t, 4096)
	old, err := RegisterMR(pd, r, shm.Addr(r.Bytes()), 4096, abi.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	key := old.Key()
	for _, tc := range []struct {
		name   string
		pd     *PD
		access abi.Access
	}{
		{"remote write without local write", pd2, abi.AccessRemoteWrite},
		{"unknown access", pd2, abi.Access(1 << 30)},
		{"another adapter's PD", b.NewPD(), abi.AccessLocalWrite},
	} {
		nr := testRegion(t, 8192)
		if _, err := old.Reregister(tc.pd, nr, shm.Addr(nr.Bytes()), 8192, tc.access); err == nil {
			t.Fatalf("%s: re-registered", tc.name)
		}
		if a.lookupMR(key) != old || !old.acquire() {
			t.Fatalf("%s: the old region is gone after a failed re-registration", tc.name)
		}
		old.release()
	}
	nr := testRegion(t, 8192)
	n, err := old.Reregister(pd2, nr, 0x10000, 8000, abi.AccessLocalWrite|abi.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if n.Key() != key || a.lookupMR(key) != n || a.NumMRs() != 1 {
		t.Fatalf("key 0x%x -> %p (new %p), %d regions", key, a.lookupMR(key), n, a.NumMRs())
	}
	if addr, length, _, access := n.Info(); addr != 0x10000 || length != 8000 || access != abi.AccessLocalWrite|abi.AccessRemoteWrite || n.PD() != pd2 {
		t.Fatalf("the new region: 0x%x+%d access %v", addr, length, access)
	}
	if old.acquire() {
		t.Fatal("the old region can still be acquired")
	}
	nr2 := testRegion(t, 4096)
	if _, err := old.Reregister(pd, nr2, shm.Addr(nr2.Bytes()), 4096, abi.AccessLocalWrite); err == nil {
		t.Fatal("a retired region was re-registered")
	}
	n.Deregister()
	if a.lookupMR(key) != nil || a.NumMRs() != 0 {
		t.Fatal("the key still finds a region after deregistration")
	}
}
