package switchagent

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/vrdma/vrdma/internal/fabric"
)

// TestVerbsRecord: a verbs uplink goes into the host record with its
// device, link layer and GIDs with their types, and the record validates;
// a record whose GID types do not pair with its GIDs does not.
func TestVerbsRecord(t *testing.T) {
	v := &VerbsUplink{Device: "rxe0", LinkLayer: "Ethernet", Transport: "InfiniBand", Up: true, MTU: 1024,
		GIDs:     [][16]byte{netip.MustParseAddr("fe80::1").As16(), netip.MustParseAddr("::ffff:10.47.91.1").As16()},
		GIDTypes: []string{"RoCE v2", "RoCE v2"}}
	u := verbsRecord("hca0", v)
	want := fabric.Uplink{Name: "hca0", Kind: fabric.UplinkVerbs, State: fabric.UplinkUp, Device: "rxe0", LinkLayer: "Ethernet",
		Transport: "InfiniBand", MTU: 1024, GIDs: []string{"fe80::1", "::ffff:10.47.91.1"}, GIDTypes: []string{"RoCE v2", "RoCE v2"}}
	if !reflect.DeepEqual(u, want) {
		t.Fatalf("verbsRecord = %+v, want %+v", u, want)
	}
	host := func(u fabric.Uplink) fabric.Host {
		return fabric.Host{Name: "a", Identity: fabric.Identity{MachineID: "0123456789abcdef0123456789abcdef", BootID: "b"}, Uplinks: []fabric.Uplink{u}}
	}
	if err := fabric.ValidateHost(host(u)); err != nil {
		t.Fatalf("the record of a verbs uplink does not validate: %v", err)
	}
	bad := u
	bad.GIDTypes = bad.GIDTypes[:1]
	if err := fabric.ValidateHost(host(bad)); err == nil {
		t.Errorf("a verbs uplink with 2 GIDs and 1 type validates")
	}
	bad = u
	bad.LinkLayer = "Token Ring"
	if err := fabric.ValidateHost(host(bad)); err == nil {
		t.Errorf("a verbs uplink with link layer %q validates", bad.LinkLayer)
	}
	down := verbsRecord("hca0", &VerbsUplink{Device: "rxe0", LinkLayer: "Unspecified"})
	if err := fabric.ValidateHost(host(down)); err != nil || down.State != fabric.UplinkDown {
		t.Errorf("a down verbs uplink: %+v, %v", down, err)
	}
	// Filtering GIDs by certificate keeps each kept GID's type.
	u.GIDTypes = []string{"RoCE v1", "RoCE v2"}
	if got := keptGIDTypes(u, []string{"::ffff:10.47.91.1"}); !reflect.DeepEqual(got, []string{"RoCE v2"}) {
		t.Errorf("keptGIDTypes = %q, want [RoCE v2]", got)
	}
}
