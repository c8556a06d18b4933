package uplink

import (
	"encoding/hex"
	"net"
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
)

func TestGIDTable(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x47, 0x91, 0x01}
	ll := netip.MustParseAddr("fe80::5054:ff:fe47:9101")
	tests := []struct {
		name  string
		mac   net.HardwareAddr
		addrs []string
		want  []string
	}{
		{"no addresses", mac, nil, []string{"fe80::5054:ff:fe47:9101"}},
		// The rxe guest of interop/captures/devinfo-A.txt.
		{"rxe guest", mac, []string{"10.47.91.1/24", "fe80::5054:ff:fe47:9101/64"},
			[]string{"fe80::5054:ff:fe47:9101", "::ffff:10.47.91.1"}},
		{"order kept", mac, []string{"fd00::2/64", "192.0.2.2/24", "fe80::1/64", "10.0.0.1/8"},
			[]string{"fe80::5054:ff:fe47:9101", "fd00::2", "::ffff:192.0.2.2", "fe80::1", "::ffff:10.0.0.1"}},
		{"repeats once", mac, []string{"10.0.0.1/8", "10.0.0.1/32"}, []string{"fe80::5054:ff:fe47:9101", "::ffff:10.0.0.1"}},
		{"loopback: no MAC", nil, []string{"127.0.0.1/8", "::1/128"}, []string{"fe80::200:ff:fe00:0", "::ffff:127.0.0.1", "::1"}},
		{"mapped address stays mapped", mac, []string{"::ffff:10.1.2.3/128"}, []string{"fe80::5054:ff:fe47:9101", "::ffff:10.1.2.3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var prefixes []netip.Prefix
			for _, a := range tt.addrs {
				prefixes = append(prefixes, netip.MustParsePrefix(a))
			}
			got := GIDTable(tt.mac, prefixes)
			if len(got) != len(tt.want) {
				t.Fatalf("GIDTable = %v, want %v", gidStrings(got), tt.want)
			}
			for i, w := range tt.want {
				if g := netip.AddrFrom16(got[i]).String(); g != w {
					t.Errorf("GID[%d] = %s, want %s", i, g, w)
				}
			}
		})
	}
	if g := GIDTable(mac, nil)[0]; g != ll.As16() {
		t.Errorf("GID[0] = %v, want %v", netip.AddrFrom16(g), ll)
	}
}

func gidStrings(gids [][16]byte) []string {
	var s []string
	for _, g := range gids {
		s = append(s, netip.AddrFrom16(g).String())
	}
	return s
}

func TestActiveMTUFor(t *testing.T) {
	tests := []struct {
		ifaceMTU int
		want     abi.MTU
	}{
		{1500, abi.MTU1024}, // Ethernet: the rxe guests' active_mtu
		{9000, abi.MTU4096},
		{65536, abi.MTU4096}, // loopback
		{4096 + 80, abi.MTU4096},
		{4096 + 79, abi.MTU2048},
		{2048 + 80, abi.MTU2048},
		{1280, abi.MTU1024}, // the IPv6 minimum
		{1024 + 80, abi.MTU1024},
		{1024 + 79, abi.MTU512},
		{336, abi.MTU256},
		{335, 0},
		{0, 0},
	}
	for _, tt := range tests {
		if got := ActiveMTUFor(tt.ifaceMTU); got != tt.want {
			t.Errorf("ActiveMTUFor(%d) = %v, want %v", tt.ifaceMTU, got, tt.want)
		}
	}
}

// The ports rxe chose in interop/captures (interop/README.md, "UDP source
// port").
func TestSourcePort(t *testing.T) {
	tests := []struct {
		lqpn, rqpn, flowLabel uint32
		want                  uint16
	}{
		{0x11, 0x11, 0, 49441},
		{0x11, 0x123, 0, 54099},
		{0x123, 0x11, 0, 54099}, // both ends agree
		{0x11, 0x11, 0x121, 49441},
		// A flow label wins over the QP numbers: its low 14 bits xor its
		// top 6.
		{0x11, 0x11, 0xFC001, 0xC000 | 0x0001 ^ 0x3F},
		{0x11, 0x11, 0x00ABC, 0xC000 | 0x0ABC},
		{0x11, 0x11, 0xF00ABC, 0xC000 | 0x0ABC}, // only 20 bits count
		{0, 5, 0, 0xC000},
		// Large QPNs: the product has bits above 20 and 40 that fold in.
		{0xFFFFFF, 0xFFFFFF, 0, foldPort(0xFFFFFF, 0xFFFFFF)},
	}
	for _, tt := range tests {
		if got := SourcePort(tt.lqpn, tt.rqpn, tt.flowLabel); got != tt.want {
			t.Errorf("SourcePort(%#x, %#x, %#x) = %d, want %d", tt.lqpn, tt.rqpn, tt.flowLabel, got, tt.want)
		}
	}
}

// foldPort spells rdma_calc_flow_label and rdma_flow_label_to_udp_sport out
// step by step.
func foldPort(l, r uint32) uint16 {
	v := uint64(l) * uint64(r)
	v = v ^ (v >> 20)
	v = v ^ (v >> 40)
	fl := uint32(v) & 0xFFFFF
	low, high := fl&0x3FFF, fl&0xFC000
	return uint16(low^(high>>14)) | 0xC000
}

func TestUDSourcePort(t *testing.T) {
	tests := []struct {
		qpn  uint32
		want uint16
	}{
		{1, 55410}, // QP1 (GSI)
		{0x14, 59626},
		{0, 0xC000},
		{0xFFFFFF, udHash(0xFFFFFF)},
	}
	for _, tt := range tests {
		if got := UDSourcePort(tt.qpn); got != tt.want {
			t.Errorf("UDSourcePort(%#x) = %d, want %d", tt.qpn, got, tt.want)
		}
		if got := UDSourcePort(tt.qpn); got < 0xC000 {
			t.Errorf("UDSourcePort(%#x) = %d, below 0xC000", tt.qpn, got)
		}
	}
}

// udHash spells hash_32(qpn, 14) out: the 32-bit product's top 14 bits.
func udHash(qpn uint32) uint16 {
	p := uint64(qpn) * 0x61C88647 % (1 << 32)
	return 0xC000 + uint16(p>>18)
}

// The test frames' ICRC is rxe's: it must reproduce the golden vector of
// REFERENCE.md §1.5 (a UC SEND Only captured from hardware, Ethernet header
// removed).
func TestTestICRCMatchesGoldenVector(t *testing.T) {
	f, err := hex.DecodeString("45010040047840004011b4d5c0a80007c0a80007c00012b7002caca22460ffff000000d300cf1710" +
		"4630818be28935d90e9a95505401be885e50000078f353f3")
	if err != nil {
		t.Fatal(err)
	}
	if !icrcOK(f) {
		t.Fatalf("ICRC %08x, the capture has %x", testICRC(f), f[len(f)-4:])
	}
	f[4]++ // the IP ID is covered
	if icrcOK(f) {
		t.Fatal("ICRC still verifies with another IP ID")
	}
}

func TestFrameFamily(t *testing.T) {
	v4 := testFrame4(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 7, 0, 0xC000, 4791, []byte("abcd"))
	v6 := testFrame6(netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), 0, 0, 0xC000, 4791, []byte("abcd"))
	mut := func(f []byte, do func([]byte)) []byte {
		c := append([]byte(nil), f...)
		do(c)
		return c
	}
	tests := []struct {
		name  string
		frame []byte
		want  int
	}{
		{"IPv4", v4, 4},
		{"IPv6", v6, 6},
		{"empty", nil, 0},
		{"IPv4 cut short", v4[:19], 0},
		{"IPv4 ID 0", mut(v4, func(f []byte) { f[4], f[5] = 0, 0 }), 0},
		{"IPv4 long total length", mut(v4, func(f []byte) { f[3]++ }), 0},
		{"IPv4 IHL too big", mut(v4, func(f []byte) { f[0] = 0x4f })[:40], 0},
		{"IPv4 IHL too small", mut(v4, func(f []byte) { f[0] = 0x44 }), 0},
		{"IPv6 cut short", v6[:39], 0},
		{"IPv6 payload length", mut(v6, func(f []byte) { f[5]-- }), 0},
		{"version 5", mut(v4, func(f []byte) { f[0] = 0x55 }), 0},
	}
	for _, tt := range tests {
		got, why := frameFamily(tt.frame)
		if got != tt.want || (got == 0) != (why != "") {
			t.Errorf("%s: frameFamily = %d %q, want %d", tt.name, got, why, tt.want)
		}
	}
}
