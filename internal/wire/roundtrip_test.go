package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"reflect"
	"testing"
)

// equalPackets reports whether a and b have equal fields and payload bytes.
func equalPackets(a, b *Packet) bool {
	x, y := *a, *b
	x.Payload, y.Payload = nil, nil
	return reflect.DeepEqual(x, y) && bytes.Equal(a.Payload, b.Payload)
}

// TestHeaderLen checks the opcode table against REFERENCE.md §1.4.
func TestHeaderLen(t *testing.T) {
	want := map[Opcode]int{
		0x00: 12, 0x01: 12, 0x02: 12, 0x03: 16, 0x04: 12, 0x05: 16,
		0x06: 28, 0x07: 12, 0x08: 12, 0x09: 16, 0x0a: 28, 0x0b: 32,
		0x0c: 28, 0x0d: 16, 0x0e: 12, 0x0f: 16, 0x10: 16, 0x11: 16, 0x12: 24,
		0x13: 40, 0x14: 40, 0x16: 16, 0x17: 16, 0x1c: 32, 0x1d: 28,
		0x20: 12, 0x21: 12, 0x22: 12, 0x23: 16, 0x24: 12, 0x25: 16,
		0x26: 28, 0x27: 12, 0x28: 12, 0x29: 16, 0x2a: 28, 0x2b: 32,
		0x64: 20, 0x65: 24,
		// XRC: RC's lengths, plus the 4-byte XRCETH on requests.
		0xa0: 16, 0xa1: 16, 0xa2: 16, 0xa3: 20, 0xa4: 16, 0xa5: 20,
		0xa6: 32, 0xa7: 16, 0xa8: 16, 0xa9: 20, 0xaa: 32, 0xab: 36,
		0xac: 32, 0xad: 16, 0xae: 12, 0xaf: 16, 0xb0: 16, 0xb1: 16, 0xb2: 24,
		0xb3: 44, 0xb4: 44, 0xb6: 20, 0xb7: 20,
	}
	for o := range 256 {
		if got := Opcode(o).HeaderLen(); got != want[Opcode(o)] {
			t.Errorf("%v (%#02x): HeaderLen %d, want %d", Opcode(o), o, got, want[Opcode(o)])
		}
	}
}

// TestRoundTrip encodes a packet of every valid opcode, over IPv4 and IPv6
// and with payloads of every pad count, decodes it and compares the fields;
// it checks the ICRC and the lengths, and that AppendHeaders, the payload
// and AppendTrailer give the same bytes as Append. It covers the opcodes
// no capture holds (SEND with immediate or invalidate, WRITE with
// immediate, UC and UD with immediate).
func TestRoundTrip(t *testing.T) {
	for _, op := range validOpcodes() {
		for _, v6 := range []bool{false, true} {
			for _, n := range []int{0, 1, 2, 3, 4, 5, 64, 1023, 1024} {
				name := fmt.Sprintf("%#02x/v6=%v/%d", uint8(op), v6, n)
				if op.Flags()&HasPayload == 0 && n != 0 {
					continue
				}
				payload := make([]byte, n)
				for i := range payload {
					payload[i] = byte(i*7 + 1)
				}
				p := samplePacket(op, v6, payload)
				b := Append([]byte("prefix"), &p)
				if string(b[:6]) != "prefix" {
					t.Fatalf("%s: Append clobbered dst", name)
				}
				b = b[6:]
				if len(b) != EncodedLen(&p, n) {
					t.Errorf("%s: %d bytes, EncodedLen %d", name, len(b), EncodedLen(&p, n))
				}
				if (len(b)-n-padLen(n)-4)%4 != 0 && !v6 {
					t.Errorf("%s: headers not a multiple of 4", name)
				}
				var q Packet
				if err := Decode(b, &q); err != nil {
					t.Fatalf("%s: Decode: %v\n%x", name, err, b)
				}
				if !equalPackets(&p, &q) {
					t.Errorf("%s: decoded\n%+v\nwant\n%+v", name, q, p)
				}
				if err := VerifyICRC(b); err != nil {
					t.Errorf("%s: VerifyICRC: %v", name, err)
				}
				if cap(q.Payload) != len(q.Payload) {
					t.Errorf("%s: payload capacity %d not clipped to %d", name, cap(q.Payload), len(q.Payload))
				}
				h := AppendHeaders(nil, &p, n)
				h = append(h, payload...)
				if got := AppendTrailer(h); !bytes.Equal(got, b) {
					t.Errorf("%s: AppendHeaders+AppendTrailer\n%x\nAppend\n%x", name, got, b)
				}
				// DecodeTransport on the UDP payload fills the same transport
				// fields and leaves the network fields alone.
				hl := 20
				if v6 {
					hl = 40
				}
				r := Packet{TTL: 7, Opcode: 0xff, Imm: 9}
				if err := DecodeTransport(b[hl+8:], &r); err != nil {
					t.Fatalf("%s: DecodeTransport: %v", name, err)
				}
				w := q
				w.Src, w.Dst, w.TOS, w.TTL, w.IPID, w.DF, w.FlowLabel, w.SrcPort, w.DstPort =
					netip.Addr{}, netip.Addr{}, 0, 7, 0, false, 0, 0, 0
				if !equalPackets(&r, &w) {
					t.Errorf("%s: DecodeTransport\n%+v\nwant\n%+v", name, r, w)
				}
			}
		}
	}
}

// TestAppendHeaderFields checks the header bytes Append writes.
func TestAppendHeaderFields(t *testing.T) {
	p := samplePacket(TransportRC|OpSendOnly, false, []byte{1, 2, 3, 4, 5})
	p.MigReq, p.FECN, p.TVer = true, true, 0
	b := Append(nil, &p)
	want := []struct {
		name string
		off  int
		got  []byte
		want []byte
	}{
		{"IPv4 version/IHL, TOS, total length", 0, b[0:4], []byte{0x45, 0x68, 0, 52}},
		{"IPv4 ID, DF", 4, b[4:8], []byte{0x12, 0x34, 0x40, 0}},
		{"IPv4 TTL, protocol", 8, b[8:10], []byte{64, 17}},
		{"UDP ports, length, checksum 0", 20, b[20:28], []byte{0xc1, 0x23, 0x12, 0xb7, 0, 32, 0, 0}},
		{"BTH opcode, SE|M|PadCnt 3, P_Key", 28, b[28:32], []byte{0x04, 0xf0, 0xff, 0xff}},
		{"BTH FECN|BECN, DestQP", 32, b[32:36], []byte{0xc0, 0, 1, 0x23}},
		{"BTH AckReq, PSN", 36, b[36:40], []byte{0x80, 0xff, 0xff, 0xfe}},
		{"payload and pad", 40, b[40:48], []byte{1, 2, 3, 4, 5, 0, 0, 0}},
	}
	for _, w := range want {
		if !bytes.Equal(w.got, w.want) {
			t.Errorf("%s at %d: %x, want %x", w.name, w.off, w.got, w.want)
		}
	}
	if ipv4Checksum(b[:20]) != 0 {
		t.Errorf("IPv4 header checksum %#x does not verify", binary.BigEndian.Uint16(b[10:]))
	}
	// IPv6: version, traffic class, flow label, payload length, next header, hop limit.
	p = samplePacket(TransportRC|OpAcknowledge, true, nil)
	b = Append(nil, &p)
	if got, want := b[:8], []byte{0x66, 0x8a, 0xbc, 0xde, 0, 28, 17, 64}; !bytes.Equal(got, want) {
		t.Errorf("IPv6 header %x, want %x", got, want)
	}
	// DstPort 0 means UDPPort.
	p = samplePacket(TransportRC|OpAcknowledge, false, nil)
	p.DstPort = 0
	var q Packet
	if err := Decode(Append(nil, &p), &q); err != nil || q.DstPort != UDPPort {
		t.Errorf("DstPort 0: %v, decoded port %d", err, q.DstPort)
	}
	// IPv4-mapped IPv6 addresses make an IPv6 packet, as Decode reads them.
	p = samplePacket(TransportRC|OpAcknowledge, true, nil)
	p.Src = netip.AddrFrom16(netip.MustParseAddr("10.0.0.1").As16())
	p.Dst = netip.MustParseAddr("::ffff:10.0.0.2")
	b = Append(nil, &p)
	if err := Decode(b, &q); err != nil || b[0]>>4 != 6 || !equalPackets(&p, &q) {
		t.Errorf("IPv4-mapped: %v, version %d, decoded %+v", err, b[0]>>4, q)
	}
}

// TestAppendGRH checks the 40-byte UD GRH area against the packet headers.
func TestAppendGRH(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		p := samplePacket(TransportUD|OpSendOnlyImm, v6, make([]byte, 512))
		b := Append(nil, &p)
		var q Packet
		if err := Decode(b, &q); err != nil {
			t.Fatal(err)
		}
		g := AppendGRH([]byte("x"), &q)
		if len(g) != 1+GRHLen || g[0] != 'x' {
			t.Fatalf("v6=%v: GRH area %d bytes, want %d", v6, len(g)-1, GRHLen)
		}
		g = g[1:]
		want := b[:40]
		if !v6 {
			want = append(make([]byte, 20), b[:20]...)
		}
		if !bytes.Equal(g, want) {
			t.Errorf("v6=%v: GRH\n%x\nwant\n%x", v6, g, want)
		}
	}
}

// TestICRCMasking checks that the variant fields do not change the ICRC
// and that the invariant ones (IPv4 ID among them) do.
func TestICRCMasking(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		p := samplePacket(TransportRC|OpWriteOnly, v6, make([]byte, 8))
		b := Append(nil, &p)
		want := ICRC(b)
		masked := []int{1, 8, 10, 11, 26, 27, 32} // TOS, TTL, checksum, UDP checksum, BTH byte 4
		if v6 {
			masked = []int{0, 1, 2, 3, 7, 46, 47, 52} // TC, flow label, hop limit, UDP checksum, BTH byte 4
		}
		for _, i := range masked {
			c := bytes.Clone(b)
			c[i] ^= 0x0f
			if got := ICRC(c); got != want {
				t.Errorf("v6=%v: byte %d changed the ICRC", v6, i)
			}
		}
		for i := range len(b) - 4 {
			if bytes.IndexByte(toBytes(masked), byte(i)) >= 0 || (v6 && i == 0) {
				continue
			}
			c := bytes.Clone(b)
			c[i] ^= 0x01
			if ICRC(c) == want {
				t.Errorf("v6=%v: byte %d is not covered by the ICRC", v6, i)
			}
		}
	}
}

func toBytes(x []int) []byte {
	b := make([]byte, len(x))
	for i, v := range x {
		b[i] = byte(v)
	}
	return b
}
