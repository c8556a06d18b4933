package fabric

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// wantInvalid checks that err is a *ValidationError on field whose message
// contains want, and that it names a fix.
func wantInvalid(t *testing.T, err error, field, want string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError on %s", err, field)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%v does not wrap ErrInvalid", err)
	}
	if ve.Field != field {
		t.Errorf("field %q, want %q (%v)", ve.Field, field, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("%q does not mention %q", err, want)
	}
	if ve.Fix == "" {
		t.Errorf("%q names no fix", err)
	}
}

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"h1", ""},
		{"a.b-c_d", ""},
		{"", "empty"},
		{"-x", "starts with"},
		{"a/b", `'/'`},
		{strings.Repeat("x", 64), "64 characters"},
	} {
		err := ValidateName("host", tc.name)
		if tc.want == "" {
			wantInvalid(t, err, "", "")
		} else {
			wantInvalid(t, err, "Name", tc.want)
		}
	}
}

func TestValidatePortGroup(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		pg          PortGroup
		field, want string
	}{
		{"defaults", PortGroup{Name: "pg0"}, "", ""},
		{"full", PortGroup{Name: "pg0", VLAN: 4094, PCP: 7, DSCP: 63, MTU: 4096, PKey: 0x8001}, "", ""},
		{"vlan reserved", PortGroup{Name: "pg0", VLAN: 4095}, "VLAN", "4094"},
		{"pcp", PortGroup{Name: "pg0", PCP: 8}, "PCP", "between 0 and 7"},
		{"dscp", PortGroup{Name: "pg0", DSCP: 64}, "DSCP", "between 0 and 63"},
		{"ethernet mtu", PortGroup{Name: "pg0", MTU: 1500}, "MTU", "Ethernet 1500 carries 1024"},
		{"pkey zero partition", PortGroup{Name: "pg0", PKey: 0x8000}, "PKey", "low 15 bits"},
		{"no name", PortGroup{}, "Name", "empty"},
	} {
		t.Run(tc.desc, func(t *testing.T) { wantInvalid(t, ValidatePortGroup(tc.pg), tc.field, tc.want) })
	}
	if got := (PortGroup{}).PathMTU(); got != DefaultMTU {
		t.Errorf("default MTU %d", got)
	}
	if got := (PortGroup{}).PartitionKey(); got != DefaultPKey {
		t.Errorf("default P_Key %#x", got)
	}
}

func testHost() Host {
	return Host{
		Name:     "h1",
		Identity: Identity{MachineID: "m1", BootID: "b1", NetNS: "net:[1]"},
		Addrs:    []string{"192.0.2.1", "2001:db8::1"},
		Uplinks: []Uplink{
			{Name: "rxe0", Kind: UplinkRXE, RoCEVersion: 2, MTU: 1024, GIDs: []string{"fe80::1", "::ffff:192.0.2.1"}, State: UplinkUp},
			{Name: "tcp0", Kind: UplinkTCP},
		},
		TCPEndpoint: "192.0.2.1:4792",
	}
}

func TestValidateHost(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		edit        func(*Host)
		field, want string
	}{
		{"ok", func(*Host) {}, "", ""},
		{"no identity", func(h *Host) { h.Identity = Identity{} }, "Identity", "machine id"},
		{"bad addr", func(h *Host) { h.Addrs = []string{"192.0.2.1/24"} }, "Addrs[0]", "not an IP"},
		{"dup uplink", func(h *Host) { h.Uplinks[1].Name = "rxe0" }, "Uplinks[1].Name", "appears twice"},
		{"unknown kind", func(h *Host) { h.Uplinks[0].Kind = "ib" }, "Uplinks[0].Kind", `unknown uplink kind "ib"`},
		{"roce version", func(h *Host) { h.Uplinks[0].RoCEVersion = 3 }, "Uplinks[0].RoCEVersion", "RoCE version 3"},
		{"rxe mtu", func(h *Host) { h.Uplinks[0].MTU = 9000 }, "Uplinks[0].MTU", "not a RoCE MTU"},
		{"rxe up without a gid", func(h *Host) { h.Uplinks[0].GIDs = nil }, "Uplinks[0].GIDs", "up but has no GID"},
		{"rxe down without a gid (its interface is missing)", func(h *Host) { h.Uplinks[0].GIDs, h.Uplinks[0].State = nil, UplinkDown }, "", ""},
		{"bad gid", func(h *Host) { h.Uplinks[0].GIDs = []string{"zz"} }, "Uplinks[0].GIDs[0]", "not an address"},
		{"tcp with gid", func(h *Host) { h.Uplinks[1].GIDs = []string{"fe80::2"} }, "Uplinks[1]", "RoCE fields"},
		{"state", func(h *Host) { h.Uplinks[0].State = "flapping" }, "Uplinks[0].State", "unknown state"},
		{"tcp without endpoint", func(h *Host) { h.TCPEndpoint = "" }, "TCPEndpoint", "no TCP channel endpoint"},
		{"bad endpoint", func(h *Host) { h.TCPEndpoint = "host:99" }, "TCPEndpoint", "not ip:port"},
		{"bad CM endpoint", func(h *Host) { h.CMEndpoint = "10.0.0.1" }, "CMEndpoint", "not ip:port"},
		{"signed without a certificate", func(h *Host) { h.Sig = "c2ln" }, "Cert", "carries no certificate"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := testHost()
			tc.edit(&h)
			wantInvalid(t, ValidateHost(h), tc.field, tc.want)
		})
	}
}

func testInstance(name string, n int) Instance {
	in := Instance{Name: name, Host: "h1"}
	for i := 0; i < n; i++ {
		in.Adapters = append(in.Adapters, Adapter{
			Index:     i,
			MAC:       fmt.Sprintf("02:00:00:%02x:%02x:%02x", len(name), name[len(name)-1], i),
			GIDs:      []string{"fd00::" + name[len(name)-1:] + ":" + string("0123456789"[i])},
			PortGroup: "pg0",
		})
	}
	return in
}

func TestValidateInstance(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		in          Instance
		edit        func(*Instance)
		field, want string
	}{
		{"ok", testInstance("vm1", 2), func(*Instance) {}, "", ""},
		{"ten adapters", testInstance("vm1", 10), func(*Instance) {}, "", ""},
		{"eleven adapters", testInstance("vm1", 10), func(in *Instance) {
			in.Adapters = append(in.Adapters, Adapter{Index: 0, MAC: "02:00:00:00:00:99", PortGroup: "pg0"})
		}, "Adapters", "at most 10 adapters"},
		{"no host", testInstance("vm1", 1), func(in *Instance) { in.Host = "" }, "Host", "no host"},
		{"index range", testInstance("vm1", 1), func(in *Instance) { in.Adapters[0].Index = 10 }, "Adapters[0].Index", "between 0 and 9"},
		{"dup index", testInstance("vm1", 2), func(in *Instance) { in.Adapters[1].Index = 0 }, "Adapters[1].Index", "two adapters are vrdma0"},
		{"bad mac", testInstance("vm1", 1), func(in *Instance) { in.Adapters[0].MAC = "nope" }, "Adapters[0].MAC", "not a 48-bit MAC"},
		{"multicast mac", testInstance("vm1", 1), func(in *Instance) { in.Adapters[0].MAC = "01:00:5e:00:00:01" }, "Adapters[0].MAC", "multicast"},
		{"dup mac", testInstance("vm1", 2), func(in *Instance) { in.Adapters[1].MAC = in.Adapters[0].MAC }, "Adapters[1].MAC", "also vrdma0's"},
		{"dup gid", testInstance("vm1", 2), func(in *Instance) { in.Adapters[1].GIDs = in.Adapters[0].GIDs }, "Adapters[1].GIDs[0]", "also vrdma0's"},
		{"no port group", testInstance("vm1", 1), func(in *Instance) { in.Adapters[0].PortGroup = "" }, "Adapters[0].PortGroup", "no port group"},
		{"bound to a verbs uplink", testInstance("vm1", 1), func(in *Instance) { in.Adapters[0].Uplink = "hca0" }, "", ""},
		{"bound to no uplink name", testInstance("vm1", 1), func(in *Instance) { in.Adapters[0].Uplink = "hca/0" }, "Adapters[0].Uplink", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := tc.in
			tc.edit(&in)
			wantInvalid(t, ValidateInstance(in), tc.field, tc.want)
		})
	}
}

func TestValidateInstanceIn(t *testing.T) {
	groups := []PortGroup{{Name: "pg0"}, {Name: "pg1"}}
	vm1 := testInstance("vm1", 2)
	for _, tc := range []struct {
		desc        string
		edit        func(*Instance)
		others      []Instance
		field, want string
	}{
		{"ok", func(*Instance) {}, []Instance{testInstance("vm22", 2)}, "", ""},
		{"replacing itself", func(*Instance) {}, []Instance{vm1}, "", ""},
		{"unknown port group", func(in *Instance) { in.Adapters[1].PortGroup = "pg9" }, nil, "Adapters[1].PortGroup", `unknown port group "pg9"`},
		{"mac of another instance", func(in *Instance) { in.Adapters[0].MAC = testInstance("vm22", 1).Adapters[0].MAC }, []Instance{testInstance("vm22", 1)}, "Adapters[0].MAC", `instance "vm22"`},
		{"gid of another instance", func(in *Instance) { in.Adapters[0].GIDs = []string{"fd00::2:0"} }, []Instance{testInstance("vm22", 1)}, "Adapters[0].GIDs[0]", `instance "vm22"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := testInstance("vm1", 2)
			tc.edit(&in)
			err := ValidateInstanceIn(in, groups, tc.others)
			wantInvalid(t, err, tc.field, tc.want)
			if tc.field == "Adapters[1].PortGroup" && !strings.Contains(err.Error(), "pg0, pg1") {
				t.Errorf("%q does not list the known port groups", err)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	a := Identity{MachineID: "m", BootID: "b", NetNS: "n1"}
	for _, tc := range []struct {
		b                 Identity
		same, sameMachine bool
	}{
		{a, true, true},
		{Identity{MachineID: "m", BootID: "b2", NetNS: "n1"}, false, true},
		{Identity{MachineID: "m", BootID: "b", NetNS: "n2"}, false, true},
		{Identity{MachineID: "m2", BootID: "b", NetNS: "n1"}, false, false},
		{Identity{}, false, false},
	} {
		if got := a.SameHost(tc.b); got != tc.same {
			t.Errorf("%v.SameHost(%v) = %v", a, tc.b, got)
		}
		if got := a.SameMachine(tc.b); got != tc.sameMachine {
			t.Errorf("%v.SameMachine(%v) = %v", a, tc.b, got)
		}
	}
	if (Identity{}).SameHost(Identity{}) {
		t.Error("empty identities are the same host")
	}
	id, err := LocalIdentity()
	if err != nil {
		t.Skipf("no local identity here: %v", err)
	}
	if !id.SameHost(id) {
		t.Errorf("local identity %v is not the same host as itself", id)
	}
}
