package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/pcap"
)

// SEND with Invalidate (IBTA 9.2.5; rxe_opcode.c): RC opcodes 0x16 and
// 0x17 carry the 4-byte IETH, the rkey to invalidate, right after the BTH
// and before the payload; UC and UD have no such opcodes.
func TestIETH(t *testing.T) {
	const rkey = 0x0badc0de
	cases := []struct {
		name    string
		op      Opcode
		valid   bool
		hdrLen  int
		payload []byte
	}{
		{"RC SEND Only with Invalidate", TransportRC | OpSendOnlyInv, true, 16, []byte("payload")},
		{"RC SEND Last with Invalidate", TransportRC | OpSendLastInv, true, 16, []byte("last")},
		{"RC SEND Only with Invalidate, empty", TransportRC | OpSendOnlyInv, true, 16, []byte{}},
		{"UC has no SEND with Invalidate", TransportUC | OpSendOnlyInv, false, 0, nil},
		{"UD has no SEND with Invalidate", TransportUD | OpSendOnlyInv, false, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.op.Valid() != c.valid || c.op.HeaderLen() != c.hdrLen {
				t.Fatalf("%v: Valid %v HeaderLen %d, want %v %d", c.op, c.op.Valid(), c.op.HeaderLen(), c.valid, c.hdrLen)
			}
			if !c.valid {
				return
			}
			if c.op.Flags()&(HasIETH|IsSend|IsLast) != HasIETH|IsSend|IsLast || c.op.Flags()&HasImm != 0 {
				t.Fatalf("%v: flags %#x, want a last SEND with IETH and no ImmDt", c.op, c.op.Flags())
			}
			p := samplePacket(c.op, false, c.payload)
			p.InvRKey = rkey
			frame := Append(nil, &p)
			udp := frame[20+8:]
			if got := binary.BigEndian.Uint32(udp[12:16]); got != rkey {
				t.Fatalf("IETH bytes after the BTH hold %#x, want %#x", got, rkey)
			}
			if !bytes.Equal(udp[16:16+len(c.payload)], c.payload) {
				t.Fatalf("the payload does not follow the IETH: % x", udp[16:])
			}
			var q Packet
			if err := Decode(frame, &q); err != nil {
				t.Fatal(err)
			}
			if q.Opcode != c.op || q.InvRKey != rkey || q.Imm != 0 || !bytes.Equal(q.Payload, c.payload) {
				t.Fatalf("decoded %v IETH %#x imm %#x payload %q", q.Opcode, q.InvRKey, q.Imm, q.Payload)
			}
			// A BTH with no room left for its IETH is truncated.
			short := append([]byte(nil), udp[:bthLen+2]...)
			short = append(short, 0, 0, 0, 0) // an ICRC's worth
			short[3] = 0                      // PadCnt 0
			if err := DecodeTransport(short, &q); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrLength) {
				t.Fatalf("a packet cut inside the IETH: %v, want ErrTruncated or ErrLength", err)
			}
		})
	}
}

// tshark names our SEND with Invalidate packets as Wireshark names the
// opcodes, and reads the IETH.
func TestTsharkSendWithInvalidate(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed: DEBIAN_FRONTEND=noninteractive apt-get install -y tshark")
	}
	path := filepath.Join(t.TempDir(), "inv.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriter(f, pcap.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	// The opcode's name in the packet details, and the Info column's.
	want := []struct{ opcode, info string }{
		{"Opcode: Reliable Connection (RC) - SEND Only with Invalidate (23)", "RC Send Only Invalidate"},
		{"Opcode: Reliable Connection (RC) - SEND Last with Invalidate (22)", "RC Send Last Invalidate"},
	}
	for i, op := range []Opcode{TransportRC | OpSendOnlyInv, TransportRC | OpSendLastInv} {
		p := samplePacket(op, false, []byte("data"))
		p.InvRKey = 0x00c0ffee
		frame := append([]byte{0x52, 0x54, 0, 0x47, 0x91, 0x01, 0x52, 0x54, 0, 0x47, 0x91, 0x02, 0x08, 0x00}, Append(nil, &p)...)
		if err := w.WritePacket(time.Date(2025, 1, 2, 3, 4, 5, i, time.UTC), frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tshark, "-r", path, "-n", "--disable-protocol", "rpcordma",
		"-T", "fields", "-E", "separator=/t", "-e", "_ws.col.Info", "-e", "infiniband.ieth").Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("tshark printed %d lines for %d frames:\n%s", len(lines), len(want), out)
	}
	for i, l := range lines {
		info, ieth, _ := strings.Cut(l, "\t")
		if !strings.HasPrefix(info, want[i].info) || !strings.HasPrefix(ieth, "00c0ffee") {
			t.Errorf("frame %d: info %q IETH %q, want %q and 00c0ffee", i+1, info, ieth, want[i].info)
		}
	}
	details, err := exec.Command(tshark, "-r", path, "-n", "--disable-protocol", "rpcordma", "-V", "-O", "infiniband").Output()
	if err != nil {
		t.Fatalf("tshark -V: %v", err)
	}
	for _, w := range want {
		if !strings.Contains(string(details), w.opcode) {
			t.Errorf("tshark -V does not say %q:\n%s", w.opcode, details)
		}
	}
}
