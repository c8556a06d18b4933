package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"testing"

	"github.com/vrdma/vrdma/internal/pcap"
)

// wantOpcodes is, per capture, how many RoCEv2 packets of each opcode it
// holds (counted independently with tshark: captures/*.summary.txt).
var wantOpcodes = map[string]map[Opcode]int{
	"rc_pingpong":         {0x00: 6, 0x01: 12, 0x02: 6, 0x11: 6},
	"rc_pingpong_small":   {0x04: 4, 0x11: 4},
	"rc_pingpong_ipv6gid": {0x04: 4, 0x11: 4},
	"uc_pingpong":         {0x20: 4, 0x22: 4},
	"ud_pingpong":         {0x64: 4},
	"send_bw":             {0x00: 5, 0x02: 5, 0x11: 5},
	"write_bw":            {0x06: 5, 0x07: 10, 0x08: 5, 0x11: 5},
	"write_lat":           {0x0a: 10, 0x11: 10},
	"read_bw":             {0x0c: 5, 0x0d: 5, 0x0e: 10, 0x0f: 5},
	"read_lat":            {0x0c: 5, 0x10: 5},
	"atomic_fadd":         {0x12: 5, 0x14: 5},
	"atomic_cas":          {0x12: 5, 0x13: 5},
	"nak_loss":            {0x06: 13, 0x07: 32, 0x08: 14, 0x11: 3},
	"rnr_nak":             {0x04: 47, 0x11: 12},
	"rping":               {0x04: 12, 0x0a: 3, 0x0c: 3, 0x10: 3, 0x11: 15, 0x64: 5},
}

// wantSyndromes is, per capture, how many AETHs of each syndrome it holds.
var wantSyndromes = map[string]map[uint8]int{
	"rc_pingpong":         {0x1f: 6},
	"rc_pingpong_small":   {0x1f: 4},
	"rc_pingpong_ipv6gid": {0x1f: 4},
	"send_bw":             {0x1f: 5},
	"write_bw":            {0x1f: 5},
	"write_lat":           {0x1f: 10},
	"read_bw":             {0x1f: 10},
	"read_lat":            {0x1f: 5},
	"atomic_fadd":         {0x1f: 5},
	"atomic_cas":          {0x1f: 5},
	"nak_loss":            {0x1f: 1, SyndromeNAKSeq: 2},
	"rnr_nak":             {0x1f: 6, SyndromeRNR | 12: 3, SyndromeNAKSeq: 3},
	"rping":               {0x1f: 18},
}

// TestGoldenCaptures decodes every RoCEv2 packet of the rxe captures,
// verifies its ICRC, re-encodes it with Append from the decoded fields and
// compares the bytes, and checks the opcodes and AETH syndromes seen.
func TestGoldenCaptures(t *testing.T) {
	all := map[Opcode]int{}
	for _, name := range goldenCaptures {
		t.Run(name, func(t *testing.T) {
			pkts := readRoCE(t, name)
			ops := map[Opcode]int{}
			syn := map[uint8]int{}
			v6 := 0
			for _, c := range pkts {
				var p Packet
				if err := Decode(c.ip, &p); err != nil {
					t.Errorf("frame %d: Decode: %v", c.frame, err)
					continue
				}
				if err := VerifyICRC(c.ip); err != nil {
					t.Errorf("frame %d (%v): VerifyICRC: %v", c.frame, p.Opcode, err)
				}
				if got := Append(nil, &p); !bytes.Equal(got, c.ip) {
					t.Errorf("frame %d (%v): re-encoded packet differs\n got %x\nwant %x", c.frame, p.Opcode, got, c.ip)
				}
				if n := EncodedLen(&p, len(p.Payload)); n != len(c.ip) {
					t.Errorf("frame %d: EncodedLen %d, packet %d bytes", c.frame, n, len(c.ip))
				}
				// Observed rxe facts (interop/README.md).
				if p.PKey != DefaultPKey || p.TTL != 64 || p.TOS != 0 || p.FECN || p.BECN || p.PadCnt != 0 {
					t.Errorf("frame %d: P_Key %#x TTL %d TOS %d FECN %v BECN %v PadCnt %d, not as rxe sends",
						c.frame, p.PKey, p.TTL, p.TOS, p.FECN, p.BECN, p.PadCnt)
				}
				if p.Src.Is4() && !p.DF {
					t.Errorf("frame %d: IPv4 without DF", c.frame)
				}
				if p.Src.Is6() {
					v6++
				}
				ops[p.Opcode]++
				if p.Opcode.Flags()&HasAETH != 0 {
					syn[p.AETH.Syndrome]++
				}
			}
			if !maps.Equal(ops, wantOpcodes[name]) {
				t.Errorf("opcodes seen %v, want %v", fmtOps(ops), fmtOps(wantOpcodes[name]))
			}
			if want := wantSyndromes[name]; !maps.Equal(syn, want) && len(syn)+len(want) > 0 {
				t.Errorf("AETH syndromes seen %v, want %v", syn, want)
			}
			if (name == "rc_pingpong_ipv6gid") != (v6 == len(pkts)) || (name != "rc_pingpong_ipv6gid" && v6 != 0) {
				t.Errorf("%d of %d packets IPv6", v6, len(pkts))
			}
			t.Logf("%d RoCEv2 packets: %v", len(pkts), fmtOps(ops))
			for o, n := range ops {
				all[o] += n
			}
		})
	}
	// Every opcode rxe sent in the tests: the other Valid opcodes are
	// covered by TestRoundTrip.
	want := []Opcode{
		0x00, 0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x0a, 0x0c, 0x0d, 0x0e, 0x0f, 0x10,
		0x11, 0x12, 0x13, 0x14, 0x20, 0x22, 0x64,
	}
	for _, o := range want {
		if all[o] == 0 {
			t.Errorf("no %v in any capture", o)
		}
	}
}

func fmtOps(m map[Opcode]int) string {
	var s []byte
	for _, o := range slices.Sorted(maps.Keys(m)) {
		s = fmt.Appendf(s, "%s %#02x: %d; ", o, uint8(o), m[o])
	}
	return string(s)
}

// TestGoldenICRCVectors checks ICRC against the two published vectors of
// REFERENCE.md §1.5: a ConnectX-4 Lx CNP and a UC SEND Only with PadCnt 2.
func TestGoldenICRCVectors(t *testing.T) {
	if got := ^crc32.ChecksumIEEE(bytes.Repeat([]byte{0xff}, 8)); got != 0xdebb20e3 {
		t.Fatalf("seed: ^crc32(8×0xff) = %#x, rxe uses 0xdebb20e3", got)
	}
	tests := []struct {
		file     string
		icrc     uint32 // the CRC value; on the wire least significant byte first
		decodeOK bool
	}{
		{"icrc_cnp_cx4.hex", 0x2a00fd82, false},
		{"icrc_uc_send_only_pad2.hex", 0xf353f378, true},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			frame := readHex(t, tt.file)
			ip, ok := pcap.IPPayloadOfFrame(pcap.LinkTypeEthernet, frame)
			if !ok {
				t.Fatal("no IP packet in the frame")
			}
			if got := ICRC(ip); got != tt.icrc {
				t.Errorf("ICRC = %#08x, want %#08x", got, tt.icrc)
			}
			if got := binary.LittleEndian.Uint32(ip[len(ip)-4:]); got != tt.icrc {
				t.Errorf("stored ICRC %#08x, want %#08x", got, tt.icrc)
			}
			if err := VerifyICRC(ip); err != nil {
				t.Errorf("VerifyICRC: %v", err)
			}
			var p Packet
			err := Decode(ip, &p)
			if !tt.decodeOK {
				if err == nil {
					t.Errorf("Decode accepted opcode %#x", ip[28])
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if p.Opcode != TransportUC|OpSendOnly || !p.MigReq || p.PadCnt != 2 || p.DestQP != 211 ||
				p.PSN != 0xcf1710 || p.IPID != 1144 || p.TOS != 1 || len(p.Payload) != 18 {
				t.Errorf("decoded %+v", p)
			}
			// Append writes UDP checksum 0 where this sender wrote 0xaca2;
			// the ICRC masks the checksum, so it still matches.
			want := bytes.Clone(ip)
			want[26], want[27] = 0, 0
			if got := Append(nil, &p); !bytes.Equal(got, want) {
				t.Errorf("re-encoded\n got %x\nwant %x", got, want)
			}
		})
	}
	// A CNP encodes as a bare BTH (it is not Valid) with its 16 reserved
	// bytes as payload: the same bytes as the hardware sent.
	ip, _ := pcap.IPPayloadOfFrame(pcap.LinkTypeEthernet, readHex(t, "icrc_cnp_cx4.hex"))
	p := Packet{
		Src: netipFrom4(ip[12:16]), Dst: netipFrom4(ip[16:20]), TOS: ip[1], TTL: ip[8], IPID: 0x718c, DF: true,
		SrcPort: 0, DstPort: UDPPort, Opcode: TransportCNP | 0x01, PKey: 0xffff, BECN: true, DestQP: 0x000118,
		Payload: make([]byte, 16),
	}
	if got := Append(nil, &p); !bytes.Equal(got, ip) {
		t.Errorf("CNP re-encoded\n got %x\nwant %x", got, ip)
	}
}
