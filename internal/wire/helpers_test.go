package wire

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/pcap"
)

// goldenCaptures are the rdma_rxe captures in testdata (Linux 6.1 rxe,
// rdma-core 44, taken by /work/shared/interop/run-tests.sh).
var goldenCaptures = []string{
	"rc_pingpong", "rc_pingpong_small", "rc_pingpong_ipv6gid", "uc_pingpong", "ud_pingpong",
	"send_bw", "write_bw", "write_lat", "read_bw", "read_lat", "atomic_fadd", "atomic_cas",
	"nak_loss", "rnr_nak", "rping",
}

// readHex reads a testdata .hex file: hex digits, whitespace, and comment
// lines starting with '#'.
func readHex(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for line := range strings.SplitSeq(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		sb.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(sb.String())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

// capturedPacket is one RoCEv2 IP packet of a capture.
type capturedPacket struct {
	frame int // 1-based frame number in the pcap
	ip    []byte
}

// readRoCE returns the IP packets of testdata/name.pcap that carry UDP to
// port 4791, found by a parser independent of Decode.
func readRoCE(t testing.TB, name string) []capturedPacket {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name+".pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []capturedPacket
	for n := 1; ; n++ {
		data, lt, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s frame %d: %v", name, n, err)
		}
		if r.OrigLen() != len(data) {
			t.Fatalf("%s frame %d: captured %d of %d bytes", name, n, len(data), r.OrigLen())
		}
		ip, ok := pcap.IPPayloadOfFrame(lt, data)
		if ok && udpDstPort(ip) == UDPPort {
			out = append(out, capturedPacket{n, append([]byte(nil), ip...)})
		}
	}
}

// udpDstPort returns the UDP destination port of an IP packet, or -1.
func udpDstPort(ip []byte) int {
	switch {
	case len(ip) >= 28 && ip[0]>>4 == 4 && ip[9] == 17:
		hl := int(ip[0]&15) * 4
		if len(ip) >= hl+8 {
			return int(binary.BigEndian.Uint16(ip[hl+2:]))
		}
	case len(ip) >= 48 && ip[0]>>4 == 6 && ip[6] == 17:
		return int(binary.BigEndian.Uint16(ip[42:]))
	}
	return -1
}

// samplePacket returns a packet of opcode op with every field its headers
// carry set to a distinctive value, over IPv4 or IPv6.
func samplePacket(op Opcode, v6 bool, payload []byte) Packet {
	p := Packet{
		Src:     netip.MustParseAddr("10.47.91.254"),
		Dst:     netip.MustParseAddr("10.47.91.1"),
		TOS:     0x68,
		TTL:     64,
		IPID:    0x1234,
		DF:      true,
		SrcPort: 0xc123,
		DstPort: UDPPort,
		Opcode:  op,
		SE:      true,
		PKey:    DefaultPKey,
		BECN:    true,
		DestQP:  0x000123,
		AckReq:  true,
		PSN:     0xfffffe,
		Payload: payload,
	}
	if v6 {
		p.Src = netip.MustParseAddr("fe80::5054:ff:fe47:9101")
		p.Dst = netip.MustParseAddr("fe80::5054:ff:fe47:9102")
		p.IPID, p.DF, p.FlowLabel = 0, false, 0xabcde
	}
	p.PadCnt = uint8(padLen(len(payload)))
	f := op.Flags()
	if f&HasXRCETH != 0 {
		p.XRCETH = XRCETH{SRQN: 0xabcdef}
	}
	if f&HasFETH != 0 {
		p.FETH = FETH{Placement: FlushGlobal | FlushPersistent, Selectivity: FlushRegion}
	}
	if f&HasRETH != 0 {
		p.RETH = RETH{VA: 0x000055c469292000, RKey: 0x8ef, Length: 4096}
	}
	if f&HasAETH != 0 {
		p.AETH = AETH{Syndrome: SyndromeACK, MSN: 0xabcdef}
	}
	if f&HasAtomicETH != 0 {
		p.Atomic = AtomicETH{VA: 0x7f0000001008, RKey: 0x1234, SwapAdd: 0x0102030405060708, Compare: 0x1112131415161718}
	}
	if f&HasAtomicAckETH != 0 {
		p.AtomicAck = 0xdeadbeefcafef00d
	}
	if f&HasImm != 0 {
		p.Imm = 0x01020304
	}
	if f&HasIETH != 0 {
		p.InvRKey = 0x5a5a5a5a
	}
	if f&HasDETH != 0 {
		p.DETH = DETH{QKey: 0x11111111, SrcQP: 0xfedcba}
	}
	if f&HasPayload == 0 {
		p.Payload, p.PadCnt = []byte{}, 0
	}
	return p
}

// validOpcodes returns every opcode for which Valid is true.
func validOpcodes() []Opcode {
	var ops []Opcode
	for o := range 256 {
		if Opcode(o).Valid() {
			ops = append(ops, Opcode(o))
		}
	}
	return ops
}

func netipFrom4(b []byte) netip.Addr { return netip.AddrFrom4([4]byte(b)) }
