package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/vrdma/vrdma/internal/pcap"
)

// FuzzDecode checks, for any input, that Decode, VerifyICRC and ICRC do not
// panic, and for input Decode accepts:
//   - Append of the decoded packet decodes to the same fields, with a valid
//     ICRC;
//   - Append reproduces the input except where it normalises: the IPv4
//     options (IHL 5), header checksum and reserved flag bit, the UDP
//     checksum (0), BTH byte 4's reserved bits, the AckReq byte's reserved
//     bits, the DETH reserved byte, pad bytes (0) and the ICRC;
//   - ICRC masks the variant fields: if the input differs from the
//     re-encoded packet only in masked fields, their ICRCs are equal;
//   - so if the input's ICRC verifies and its normalised fields hold what
//     Append writes, Append reproduces the input exactly.
func FuzzDecode(f *testing.F) {
	for _, name := range goldenCaptures {
		for _, c := range readRoCE(f, name) {
			f.Add(c.ip)
		}
	}
	for _, name := range []string{"icrc_cnp_cx4.hex", "icrc_uc_send_only_pad2.hex"} {
		ip, _ := pcap.IPPayloadOfFrame(pcap.LinkTypeEthernet, readHex(f, name))
		f.Add(ip)
	}
	for _, op := range validOpcodes() {
		for _, v6 := range []bool{false, true} {
			p := samplePacket(op, v6, []byte{1, 2, 3, 4, 5, 6, 7})
			f.Add(Append(nil, &p))
		}
	}
	// SEND with Invalidate with no payload, and cut inside its IETH.
	for _, op := range []Opcode{TransportRC | OpSendOnlyInv, TransportRC | OpSendLastInv} {
		p := samplePacket(op, false, nil)
		p.PadCnt = 0
		b := Append(nil, &p)
		f.Add(b)
		f.Add(b[:20+8+bthLen+2])
	}
	// FLUSH, cut inside its FETH, and with a reserved FETH bit set.
	{
		p := samplePacket(TransportRC|OpFlush, false, nil)
		b := Append(nil, &p)
		f.Add(b)
		f.Add(b[:20+8+bthLen+2])
		r := append([]byte(nil), b...)
		r[20+8+bthLen] |= 0x80
		f.Add(r)
	}
	// ATOMIC WRITE with its 8 bytes, and cut inside its RETH.
	{
		p := samplePacket(TransportRC|OpAtomicWrite, false, []byte{1, 2, 3, 4, 5, 6, 7, 8})
		b := Append(nil, &p)
		f.Add(b)
		f.Add(b[:20+8+bthLen+10])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		icrcOK := VerifyICRC(b) == nil
		_ = ICRC(b)
		var p Packet
		if err := Decode(b, &p); err != nil {
			return
		}
		if len(b) < 4 {
			t.Fatalf("Decode accepted %d bytes", len(b))
		}
		q := Append(nil, &p)
		var p2 Packet
		if err := Decode(q, &p2); err != nil {
			t.Fatalf("re-encoded packet does not decode: %v\nin  %x\nout %x", err, b, q)
		}
		if !equalPackets(&p, &p2) {
			t.Fatalf("fields differ after Append:\n%+v\n%+v", p, p2)
		}
		if err := VerifyICRC(q); err != nil {
			t.Fatalf("re-encoded packet: %v", err)
		}

		// Line b up with q: drop IPv4 options.
		in := bytes.Clone(b)
		if in[0]>>4 == 4 && in[0]&0x0f > 5 {
			hl := int(in[0]&0x0f) * 4
			in = append(in[:20:20], in[hl:]...)
			in[0] = 0x45
			binary.BigEndian.PutUint16(in[2:], uint16(len(in)))
			icrcOK = false
		}
		if len(in) != len(q) {
			t.Fatalf("input %d bytes (without options), re-encoded %d", len(in), len(q))
		}
		masked, unmasked := normalised(q, &p)
		// Differences outside the normalised fields are bugs.
		norm := func(x []byte, idx []fieldMask) {
			for _, m := range idx {
				x[m.off] = x[m.off]&^m.mask | q[m.off]&m.mask
			}
		}
		x := bytes.Clone(in)
		norm(x, masked)
		norm(x, unmasked)
		copy(x[len(x)-4:], q[len(q)-4:])
		if !bytes.Equal(x, q) {
			t.Fatalf("re-encoded packet differs outside normalised fields\nin  %x\nout %x", in, q)
		}
		// With the unmasked normalised fields as Append writes them, the
		// masked ones do not change the ICRC.
		y := bytes.Clone(in)
		norm(y, unmasked)
		if ICRC(y) != ICRC(q) {
			t.Fatalf("masked fields change the ICRC\nin  %x\nout %x", y, q)
		}
		// So if the input's ICRC verified and its normalised fields hold
		// what Append writes, Append reproduces the input.
		z := bytes.Clone(in)
		norm(z, masked)
		if icrcOK && bytes.Equal(z[:len(z)-4], x[:len(x)-4]) && !bytes.Equal(z, q) {
			t.Fatalf("valid input not reproduced\nin  %x\nout %x", z, q)
		}
	})
}

// fieldMask names bits of one byte.
type fieldMask struct {
	off  int
	mask byte
}

// normalised returns the bits of q, a packet Append wrote for p, that
// Append normalises rather than copies from p: those the ICRC masks (IPv4
// header checksum, UDP checksum, BTH byte 4's reserved bits) and those it
// covers (IPv4 reserved flag bit, BTH reserved bits after AckReq, DETH's
// and XRCETH's reserved bytes, pad bytes).
func normalised(q []byte, p *Packet) (masked, unmasked []fieldMask) {
	hl := 40
	if q[0]>>4 == 4 {
		hl = 20
		masked = append(masked, fieldMask{10, 0xff}, fieldMask{11, 0xff})
		unmasked = append(unmasked, fieldMask{6, 0x80})
	}
	t := hl + udpLen
	masked = append(masked, fieldMask{hl + 6, 0xff}, fieldMask{hl + 7, 0xff}, fieldMask{t + 4, 0x3f})
	unmasked = append(unmasked, fieldMask{t + 8, 0x7f})
	if p.Opcode.Flags()&HasDETH != 0 {
		unmasked = append(unmasked, fieldMask{t + bthLen + 4, 0xff})
	}
	if p.Opcode.Flags()&HasXRCETH != 0 { // its reserved byte, right after the BTH
		unmasked = append(unmasked, fieldMask{t + bthLen, 0xff})
	}
	for i := range int(p.PadCnt) {
		unmasked = append(unmasked, fieldMask{len(q) - 4 - 1 - i, 0xff})
	}
	return masked, unmasked
}
