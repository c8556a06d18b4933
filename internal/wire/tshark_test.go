package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/pcap"
)

// tsharkFields are the columns TestTshark asks for, in order.
var tsharkFields = []string{
	"frame.number",
	"infiniband.bth.opcode",
	"_ws.malformed",
	"_ws.expert",
	"_ws.expert.message",
	"_ws.expert.severity",
	"frame.protocols",
	"infiniband.bth.padcnt",
	"infiniband.bth.destqp",
	"infiniband.bth.psn",
	"infiniband.invariant.crc",
	"infiniband.reth.dmalen",
	"infiniband.aeth.msn",
	"infiniband.atomiceth.cmpdt",
	"infiniband.atomicacketh.origremdt",
	"infiniband.immdt",
	"infiniband.ieth",
	"infiniband.deth.srcqp",
	"infiniband.vendor",
}

// TestTshark has Wireshark's InfiniBand dissector decode one packet of
// every valid opcode over IPv4 and some over IPv6, in Ethernet frames
// written with package pcap, and checks that each decodes as the intended
// opcode, with every extended header where Append put it, the ICRC found
// in the last 4 bytes, and no malformed-packet or expert warning (except
// Wireshark's complaint about UDP checksum 0 over IPv6, which is what rxe
// sends). Wireshark does not check the ICRC (see TestGolden* for that).
func TestTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed: DEBIAN_FRONTEND=noninteractive apt-get install -y tshark")
	}
	type sent struct {
		p   Packet
		pkt []byte
	}
	var pkts []sent
	for _, op := range validOpcodes() {
		pkts = append(pkts, sent{p: samplePacket(op, false, []byte("payload"))}) // 7 bytes: PadCnt 1
	}
	for _, op := range []Opcode{
		TransportRC | OpSendOnly, TransportRC | OpWriteOnlyImm, TransportRC | OpAcknowledge,
		TransportRC | OpAtomicAcknowledge, TransportRC | OpFetchAdd, TransportUC | OpSendLastImm,
		TransportUD | OpSendOnly, TransportUD | OpSendOnlyImm,
	} {
		pkts = append(pkts, sent{p: samplePacket(op, true, []byte("pay"))}) // 3 bytes: PadCnt 1
	}
	path := filepath.Join(t.TempDir(), "opcodes.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriter(f, pcap.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range pkts {
		s := &pkts[i]
		s.p.PSN = uint32(0x100000 + i)
		et := []byte{0x08, 0x00}
		if !is4(&s.p) {
			et = []byte{0x86, 0xdd}
		}
		frame := append([]byte{0x52, 0x54, 0, 0x47, 0x91, 0x01, 0x52, 0x54, 0, 0x47, 0x91, 0x02}, et...)
		frame = Append(frame, &s.p)
		s.pkt = frame[14:]
		if err := w.WritePacket(ts.Add(time.Duration(i)*time.Millisecond), frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// RPC-over-RDMA's heuristic claims some RC SEND payloads and then
	// reports our arbitrary payload bytes as a malformed RPC message.
	args := []string{"-r", path, "-n", "-o", "ip.check_checksum:TRUE", "--disable-protocol", "rpcordma",
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=|"}
	for _, fl := range tsharkFields {
		args = append(args, "-e", fl)
	}
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(pkts) {
		t.Fatalf("tshark printed %d lines for %d frames:\n%s\n%s", len(lines), len(pkts), out, stderr.String())
	}
	for i, line := range lines {
		s := &pkts[i]
		col := strings.Split(line, "\t")
		if len(col) != len(tsharkFields) {
			t.Errorf("frame %d: %d columns: %q", i+1, len(col), line)
			continue
		}
		get := func(name string) string {
			for j, fl := range tsharkFields {
				if fl == name {
					return col[j]
				}
			}
			panic(name)
		}
		what := fmt.Sprintf("frame %d (%v, IPv6 %v)", i+1, s.p.Opcode, !is4(&s.p))
		if got := get("frame.number"); got != strconv.Itoa(i+1) {
			t.Errorf("%s: frame.number %q", what, got)
		}
		if got, want := get("infiniband.bth.opcode"), strconv.Itoa(int(s.p.Opcode)); got != want {
			t.Errorf("%s: opcode %q, want %q", what, got, want)
		}
		if got := get("_ws.malformed"); got != "" {
			t.Errorf("%s: malformed: %q", what, got)
		}
		if msg := get("_ws.expert.message"); msg != "" {
			if is4(&s.p) || msg != "Illegal checksum value (0)" {
				t.Errorf("%s: expert info %q (%q), severity %q", what, get("_ws.expert"), msg, get("_ws.expert.severity"))
			}
		}
		proto := get("frame.protocols")
		if !strings.HasSuffix(proto, ":udp:infiniband") && !strings.HasSuffix(proto, ":udp:infiniband:data") {
			t.Errorf("%s: protocols %q", what, proto)
		}
		if got, want := get("infiniband.bth.padcnt"), strconv.Itoa(int(s.p.PadCnt)); got != want {
			t.Errorf("%s: PadCnt %q, want %q", what, got, want)
		}
		if got, want := get("infiniband.bth.psn"), strconv.Itoa(int(s.p.PSN)); got != want {
			t.Errorf("%s: PSN %q, want %q", what, got, want)
		}
		if got, want := numField(get("infiniband.bth.destqp")), uint64(s.p.DestQP); got != want {
			t.Errorf("%s: DestQP %#x, want %#x", what, got, want)
		}
		if s.p.Opcode.Transport() == TransportXRC {
			// Wireshark 4.0 names the XRC opcodes but leaves what follows
			// the BTH undissected, as "Unknown/Vendor Specific Data": the
			// headers Append wrote, XRCETH first (requests only), then the
			// payload and the ICRC.
			fl := s.p.Opcode.Flags()
			want := hex.EncodeToString(s.pkt[20+udpLen+bthLen:])
			v := get("infiniband.vendor")
			if got := v[strings.LastIndex(v, "|")+1:]; got != want {
				t.Errorf("%s: undissected bytes %q, want %q", what, got, want)
			}
			if fl&HasXRCETH != 0 && !strings.HasPrefix(want, fmt.Sprintf("%08x", s.p.XRCETH.SRQN)) {
				t.Errorf("%s: the bytes after the BTH %q do not start with the XRCETH %#x", what, want, s.p.XRCETH.SRQN)
			}
			continue
		}
		if (s.p.Opcode == TransportRC|OpAtomicWrite || s.p.Opcode == TransportRC|OpFlush) && !tsharkKnowsIBTA15(get("infiniband.reth.dmalen")) {
			// Wireshark 4.0 (Debian 12) does not know IBTA 1.5's opcodes
			// (no name, no RETH, no ICRC): only the BTH is checked.
			continue
		}
		// The dissector reads the ICRC as a big-endian number at the end.
		if got, want := numField(get("infiniband.invariant.crc")), uint64(binary.BigEndian.Uint32(s.pkt[len(s.pkt)-4:])); got != want {
			t.Errorf("%s: ICRC field %#x, want %#x", what, got, want)
		}
		fl := s.p.Opcode.Flags()
		checks := []struct {
			field string
			has   bool
			want  uint64
		}{
			{"infiniband.reth.dmalen", fl&HasRETH != 0, uint64(s.p.RETH.Length)},
			{"infiniband.aeth.msn", fl&HasAETH != 0, uint64(s.p.AETH.MSN)},
			{"infiniband.atomiceth.cmpdt", fl&HasAtomicETH != 0, s.p.Atomic.Compare},
			{"infiniband.atomicacketh.origremdt", fl&HasAtomicAckETH != 0, s.p.AtomicAck},
			{"infiniband.immdt", fl&HasImm != 0, uint64(s.p.Imm)},
			{"infiniband.ieth", fl&HasIETH != 0, uint64(s.p.InvRKey)},
			{"infiniband.deth.srcqp", fl&HasDETH != 0, uint64(s.p.DETH.SrcQP)},
		}
		for _, c := range checks {
			v := get(c.field)
			if (v != "") != c.has {
				t.Errorf("%s: %s = %q, present: want %v", what, c.field, v, c.has)
				continue
			}
			if !c.has {
				continue
			}
			// ImmDt and IETH are byte fields ("01020304"), each listed twice.
			v, _, _ = strings.Cut(v, "|")
			if c.field == "infiniband.immdt" || c.field == "infiniband.ieth" {
				v = "0x" + v
			}
			if numField(v) != c.want {
				t.Errorf("%s: %s = %q, want %#x", what, c.field, v, c.want)
			}
		}
	}
	if t.Failed() {
		t.Logf("tshark output:\n%s", out)
	}
}

// tsharkKnowsIBTA15 reports whether this tshark read the RETH of an RDMA
// ATOMIC WRITE or FLUSH (dmalen, the RETH's last field, is the sign).
func tsharkKnowsIBTA15(dmalen string) bool { return dmalen != "" }

// numField parses a tshark number, decimal or 0x-prefixed hex.
func numField(s string) uint64 {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 1<<64 - 1
	}
	return v
}
