package fabric

import "testing"

// TestValidateVerbsDevice: a host record's verbs uplink carries its
// device's kind (transport), IB subnet, IP subnets and capabilities, which
// path selection reads from other hosts' records: each is checked, and a
// bad one is refused with the field and a fix.
func TestValidateVerbsDevice(t *testing.T) {
	ok := Uplink{Name: "hca0", Kind: UplinkVerbs, Device: "mlx5_0", LinkLayer: "InfiniBand", Transport: "InfiniBand", MTU: 4096, LID: 3, SMLID: 1,
		SubnetPrefix: "fe80:0000:0000:0000", GIDs: []string{"fe80::1"}, GIDTypes: []string{"IB"},
		Caps: &VerbsCaps{Atomic: AtomicHCA, MaxSGE: 30, MaxQPWR: 32768}, CarriesQPs: true}
	host := func(u Uplink) Host {
		return Host{Name: "a", Identity: Identity{MachineID: "0123456789abcdef0123456789abcdef", BootID: "b"}, Uplinks: []Uplink{u}}
	}
	for _, tc := range []struct {
		desc        string
		edit        func(*Uplink)
		field, want string
	}{
		{"infiniband", func(*Uplink) {}, "", ""},
		{"siw", func(u *Uplink) {
			u.LinkLayer, u.Transport, u.LID, u.SMLID, u.SubnetPrefix = "Ethernet", "iWARP", 0, 0, ""
			u.Subnets, u.Caps = []string{"10.47.91.0/24", "2001:db8::/64"}, &VerbsCaps{Atomic: AtomicNone, MaxSGE: 6, MaxQPWR: 1024}
		}, "", ""},
		{"transport", func(u *Uplink) { u.Transport = "usNIC" }, "Uplinks[0].Transport", `"usNIC"`},
		{"subnet prefix", func(u *Uplink) { u.SubnetPrefix = "fe80::" }, "Uplinks[0].SubnetPrefix", "fe80:0000:0000:0000"},
		{"subnet prefix case", func(u *Uplink) { u.SubnetPrefix = "FE80:0000:0000:0000" }, "Uplinks[0].SubnetPrefix", "hex"},
		{"subnet not a prefix", func(u *Uplink) { u.Subnets = []string{"10.47.91.1"} }, "Uplinks[0].Subnets[0]", "not an IP prefix"},
		{"subnet host bits", func(u *Uplink) { u.Subnets = []string{"10.47.91.1/24"} }, "Uplinks[0].Subnets[0]", "host bits zero"},
		{"too many subnets", func(u *Uplink) { u.Subnets = make([]string, maxVerbsSubnets+1) }, "Uplinks[0].Subnets", "subnets"},
		{"atomic", func(u *Uplink) { u.Caps = &VerbsCaps{Atomic: "sometimes"} }, "Uplinks[0].Caps.Atomic", `"sometimes"`},
		{"negative SGEs", func(u *Uplink) { u.Caps = &VerbsCaps{Atomic: AtomicNone, MaxSGE: -1} }, "Uplinks[0].Caps.MaxSGE", "MaxSGE -1"},
		{"huge inline", func(u *Uplink) { u.Caps = &VerbsCaps{Atomic: AtomicNone, MaxInline: 1 << 30} }, "Uplinks[0].Caps.MaxInline", "MaxInline"},
		{"carries", func(u *Uplink) { u.Carries = []string{"RC QPs", "atomics"} }, "", ""},
		{"carries a control character", func(u *Uplink) { u.Carries = []string{"RC QPs\x1b[2J"} }, "Uplinks[0].Carries[0]", "no feature name"},
		{"carries an empty name", func(u *Uplink) { u.Carries = []string{""} }, "Uplinks[0].Carries[0]", "no feature name"},
		{"carries too many", func(u *Uplink) { u.Carries = make([]string, maxVerbsCarries+1) }, "Uplinks[0].Carries", "features it carries"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			u := ok
			tc.edit(&u)
			err := ValidateHost(host(u))
			wantInvalid(t, err, tc.field, tc.want)
		})
	}
}
