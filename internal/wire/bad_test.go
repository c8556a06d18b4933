package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// rawPacket returns an IPv4 or IPv6 packet with consistent IP and UDP
// lengths around up, an arbitrary UDP payload (BTH onwards).
func rawPacket(v6 bool, up []byte) []byte {
	p := samplePacket(TransportRC|OpSendOnly, v6, nil)
	var b []byte
	if v6 {
		b = appendIPv6(b, &p, udpLen+len(up))
	} else {
		b = appendIPv4(b, &p, ipv4MinLen+udpLen+len(up))
	}
	b = binary.BigEndian.AppendUint16(b, p.SrcPort)
	b = binary.BigEndian.AppendUint16(b, UDPPort)
	b = binary.BigEndian.AppendUint16(b, uint16(udpLen+len(up)))
	b = append(b, 0, 0)
	return append(b, up...)
}

// bth returns a BTH with the given opcode and byte 1 (SE|M|PadCnt|TVer).
func bth(op Opcode, b1 byte) []byte {
	return []byte{byte(op), b1, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 1}
}

// TestDecodeBadInput checks that Decode rejects each kind of malformed or
// foreign packet with the right sentinel error.
func TestDecodeBadInput(t *testing.T) {
	p4 := samplePacket(TransportRC|OpSendOnly, false, []byte("8 bytes!"))
	v4 := Append(nil, &p4) // 52 bytes
	p6 := samplePacket(TransportRC|OpSendOnly, true, []byte("8 bytes!"))
	v6 := Append(nil, &p6)
	mod := func(b []byte, f func(b []byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return c
	}
	icrc := []byte{0, 0, 0, 0}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"IP version 5", mod(v4, func(b []byte) { b[0] = 0x55 }), ErrVersion},
		{"IP version 0", mod(v4, func(b []byte) { b[0] = 0x05 }), ErrVersion},
		{"IPv4 IHL 4", mod(v4, func(b []byte) { b[0] = 0x44 }), ErrLength},
		{"IPv4 IHL 15 beyond packet", mod(v4, func(b []byte) { b[0] = 0x4f }), ErrTruncated},
		{"IPv4 total length too big", mod(v4, func(b []byte) { b[3]++ }), ErrTruncated},
		{"IPv4 total length too small", mod(v4, func(b []byte) { b[3]-- }), ErrLength},
		{"IPv4 trailing bytes (Ethernet pad)", append(bytes.Clone(v4), 0, 0), ErrLength},
		{"IPv4 more fragments", mod(v4, func(b []byte) { b[6] |= 0x20 }), ErrNotRoCE},
		{"IPv4 fragment offset", mod(v4, func(b []byte) { b[7] = 1 }), ErrNotRoCE},
		{"IPv4 TCP", mod(v4, func(b []byte) { b[9] = 6 }), ErrNotRoCE},
		{"IPv6 payload length too big", mod(v6, func(b []byte) { b[5]++ }), ErrTruncated},
		{"IPv6 payload length too small", mod(v6, func(b []byte) { b[5]-- }), ErrLength},
		{"IPv6 hop-by-hop header", mod(v6, func(b []byte) { b[6] = 0 }), ErrNotRoCE},
		{"UDP to port 4792", mod(v4, func(b []byte) { b[23]++ }), ErrNotRoCE},
		{"UDP length too big", mod(v4, func(b []byte) { b[25]++ }), ErrLength},
		{"UDP length too small", mod(v4, func(b []byte) { b[25]-- }), ErrLength},
		{"UDP length 0", mod(v4, func(b []byte) { b[24], b[25] = 0, 0 }), ErrLength},
		{"IPv6 UDP length too small", mod(v6, func(b []byte) { b[45]-- }), ErrLength},
		{"IPv4 shorter than UDP header", rawPacket(false, nil)[:27], ErrTruncated},
		{"no UDP payload", rawPacket(false, nil), ErrTruncated},
		{"UDP payload shorter than BTH+ICRC", rawPacket(false, make([]byte, 15)), ErrTruncated},
		{"BTH TVer 1", mod(v4, func(b []byte) { b[29] |= 1 }), ErrVersion},
		{"BTH TVer 15 IPv6", mod(v6, func(b []byte) { b[49] |= 15 }), ErrVersion},
		{"opcode RC 0x15 (reserved)", mod(v4, func(b []byte) { b[28] = 0x15 }), ErrOpcode},
		{"opcode RC 0x1e (reserved)", mod(v4, func(b []byte) { b[28] = 0x1e }), ErrOpcode},
		{"opcode UC FLUSH (RC only)", mod(v4, func(b []byte) { b[28] = 0x3c }), ErrOpcode},
		{"FLUSH shorter than FETH and RETH", rawPacket(false, cat(bth(0x1c, 0), make([]byte, 16), icrc)), ErrTruncated},
		{"FLUSH with a reserved FETH bit", rawPacket(false, cat(bth(0x1c, 0), []byte{0, 0, 0, 0x41}, make([]byte, 16), icrc)), ErrLength},
		{"FLUSH with payload", rawPacket(false, cat(bth(0x1c, 0), make([]byte, 4+16+4), icrc)), ErrLength},
		{"ATOMIC WRITE shorter than RETH", rawPacket(false, cat(bth(0x1d, 0), make([]byte, 12), icrc)), ErrTruncated},
		{"opcode UC READ request", mod(v4, func(b []byte) { b[28] = 0x2c }), ErrOpcode},
		{"opcode RD SEND only", mod(v4, func(b []byte) { b[28] = 0x44 }), ErrOpcode},
		{"opcode UD SEND first", mod(v4, func(b []byte) { b[28] = 0x60 }), ErrOpcode},
		{"opcode CNP", mod(v4, func(b []byte) { b[28] = 0x81 }), ErrOpcode},
		{"opcode 0xff", mod(v4, func(b []byte) { b[28] = 0xff }), ErrOpcode},
		{"WRITE First shorter than RETH", rawPacket(false, cat(bth(0x06, 0), make([]byte, 12), icrc)), ErrTruncated},
		{"CmpSwap shorter than AtomicETH", rawPacket(true, cat(bth(0x13, 0), make([]byte, 24), icrc)), ErrTruncated},
		{"UD SEND without DETH", rawPacket(false, cat(bth(0x64, 0), icrc)), ErrTruncated},
		{"PadCnt 1 with no payload", rawPacket(false, cat(bth(0x04, 0x10), icrc)), ErrLength},
		{"PadCnt 3 with no payload", rawPacket(true, cat(bth(0x04, 0x30), icrc)), ErrLength},
		{"payload+pad not a multiple of 4", rawPacket(false, cat(bth(0x04, 0x00), make([]byte, 5), icrc)), ErrLength},
		{"PadCnt 1 makes 6 bytes", rawPacket(false, cat(bth(0x04, 0x10), make([]byte, 6), icrc)), ErrLength},
		{"ACK with payload", rawPacket(false, cat(bth(0x11, 0), make([]byte, 4+4), icrc)), ErrLength},
		{"READ request with payload", rawPacket(false, cat(bth(0x0c, 0), make([]byte, 16+4), icrc)), ErrLength},
	}
	all := []error{ErrTruncated, ErrVersion, ErrOpcode, ErrLength, ErrICRC, ErrNotRoCE}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Packet
			err := Decode(tt.in, &p)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode = %v, want %v", err, tt.want)
			}
			for _, e := range all {
				if e != tt.want && errors.Is(err, e) {
					t.Errorf("%v also matches %v", err, e)
				}
			}
			if err.Error() == tt.want.Error() {
				t.Errorf("message %q says no more than the sentinel", err)
			}
		})
	}
	// The unmodified packets decode.
	var p Packet
	if err := Decode(v4, &p); err != nil {
		t.Fatal(err)
	}
	if err := Decode(v6, &p); err != nil {
		t.Fatal(err)
	}
}

// TestDecodeTruncated cuts valid packets of every opcode at every length:
// as they are (ErrTruncated) and with the IP and UDP lengths rewritten to
// match the cut (ErrTruncated or ErrLength, and never a panic).
func TestDecodeTruncated(t *testing.T) {
	for _, op := range validOpcodes() {
		for _, v6 := range []bool{false, true} {
			p := samplePacket(op, v6, []byte("0123456789"))
			b := Append(nil, &p)
			hl := 20
			if v6 {
				hl = 40
			}
			var q Packet
			for n := range len(b) {
				name := fmt.Sprintf("%v v6=%v cut at %d of %d", op, v6, n, len(b))
				if err := Decode(b[:n], &q); !errors.Is(err, ErrTruncated) {
					t.Errorf("%s: %v, want ErrTruncated", name, err)
				}
				if err := VerifyICRC(b[:n]); err == nil {
					t.Errorf("%s: VerifyICRC accepted it", name)
				}
				if n < hl+udpLen {
					continue
				}
				c := bytes.Clone(b[:n])
				if v6 {
					binary.BigEndian.PutUint16(c[4:], uint16(n-hl))
				} else {
					binary.BigEndian.PutUint16(c[2:], uint16(n))
				}
				binary.BigEndian.PutUint16(c[hl+4:], uint16(n-hl))
				// What is left for payload and pad; the cut packet is valid
				// if that still holds the pad and is a multiple of 4.
				rem := n - hl - udpLen - op.HeaderLen() - icrcLen
				ok := rem >= int(p.PadCnt) && rem%4 == 0 && (rem == 0 || op.Flags()&HasPayload != 0)
				err := Decode(c, &q)
				if ok {
					if err != nil || len(q.Payload) != rem-int(p.PadCnt) {
						t.Errorf("%s, lengths fixed: %v, payload %d bytes, want %d", name, err, len(q.Payload), rem-int(p.PadCnt))
					}
					continue
				}
				if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrLength) {
					t.Errorf("%s, lengths fixed: %v, want ErrTruncated or ErrLength", name, err)
				}
				if err := DecodeTransport(c[hl+udpLen:], &q); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrLength) {
					t.Errorf("%s: DecodeTransport: %v, want ErrTruncated or ErrLength", name, err)
				}
			}
		}
	}
}

// TestVerifyICRCBad checks VerifyICRC's errors.
func TestVerifyICRCBad(t *testing.T) {
	p := samplePacket(TransportRC|OpWriteOnly, false, make([]byte, 16))
	b := Append(nil, &p)
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"IP version 7", append([]byte{0x70}, b[1:]...), ErrVersion},
		{"IHL 3", append([]byte{0x43}, b[1:]...), ErrLength},
		{"shorter than IP+UDP+BTH+ICRC", b[:43], ErrTruncated},
		{"payload bit flipped", func() []byte { c := bytes.Clone(b); c[60] ^= 0x80; return c }(), ErrICRC},
		{"IP ID changed", func() []byte { c := bytes.Clone(b); c[5]++; return c }(), ErrICRC},
		{"ICRC byte changed", func() []byte { c := bytes.Clone(b); c[len(c)-1]++; return c }(), ErrICRC},
	}
	for _, tt := range tests {
		if err := VerifyICRC(tt.in); !errors.Is(err, tt.want) {
			t.Errorf("%s: VerifyICRC = %v, want %v", tt.name, err, tt.want)
		}
		_ = ICRC(tt.in) // must not panic
	}
	if err := VerifyICRC(b); err != nil {
		t.Errorf("unmodified: %v", err)
	}
	// The ICRC covers the bytes before the slot only.
	c := bytes.Clone(b)
	binary.LittleEndian.PutUint32(c[len(c)-4:], 0)
	if ICRC(c) != ICRC(b) {
		t.Error("ICRC depends on the slot")
	}
}
