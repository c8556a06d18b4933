package wire

import (
	"testing"
)

// TestNoAllocs checks that Decode, DecodeTransport, ICRC, VerifyICRC and
// the Append functions do not allocate when dst has room.
func TestNoAllocs(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		p := samplePacket(TransportRC|OpWriteFirst, v6, make([]byte, 1024))
		pkt := Append(nil, &p)
		buf := make([]byte, 0, 2048)
		var q Packet
		bad := append([]byte(nil), pkt...)
		bad[len(bad)-1]++
		short := pkt[:30]
		hl := 20
		if v6 {
			hl = 40
		}
		fns := map[string]func(){
			"Decode":          func() { _ = Decode(pkt, &q) },
			"Decode error":    func() { _ = Decode(short, &q) },
			"DecodeTransport": func() { _ = DecodeTransport(pkt[hl+8:], &q) },
			"ICRC":            func() { _ = ICRC(pkt) },
			"VerifyICRC":      func() { _ = VerifyICRC(pkt) },
			"VerifyICRC bad":  func() { _ = VerifyICRC(bad) },
			"Append":          func() { _ = Append(buf[:0], &p) },
			"AppendHeaders+AppendTrailer": func() {
				b := AppendHeaders(buf[:0], &p, len(p.Payload))
				_ = AppendTrailer(append(b, p.Payload...))
			},
			"AppendGRH":  func() { _ = AppendGRH(buf[:0], &p) },
			"EncodedLen": func() { _ = EncodedLen(&p, 1024) },
		}
		for name, f := range fns {
			if n := testing.AllocsPerRun(100, f); n != 0 {
				t.Errorf("v6=%v %s: %v allocations per run", v6, name, n)
			}
		}
	}
}

func benchPacket(b *testing.B, v6 bool) (Packet, []byte) {
	p := samplePacket(TransportRC|OpWriteFirst, v6, make([]byte, 1024))
	return p, Append(nil, &p)
}

func BenchmarkDecode(b *testing.B) {
	_, pkt := benchPacket(b, false)
	var q Packet
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		if err := Decode(pkt, &q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppend1024(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		name := "IPv4"
		if v6 {
			name = "IPv6"
		}
		b.Run(name, func(b *testing.B) {
			p, pkt := benchPacket(b, v6)
			buf := make([]byte, 0, 2048)
			b.ReportAllocs()
			b.SetBytes(int64(len(pkt)))
			for b.Loop() {
				buf = Append(buf[:0], &p)
			}
		})
	}
}

func BenchmarkICRC(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		name := "IPv4"
		if v6 {
			name = "IPv6"
		}
		b.Run(name+"/1024", func(b *testing.B) {
			_, pkt := benchPacket(b, v6)
			b.ReportAllocs()
			b.SetBytes(int64(len(pkt)))
			for b.Loop() {
				_ = ICRC(pkt)
			}
		})
	}
	b.Run("IPv4/ACK", func(b *testing.B) {
		p := samplePacket(TransportRC|OpAcknowledge, false, nil)
		pkt := Append(nil, &p)
		b.ReportAllocs()
		b.SetBytes(int64(len(pkt)))
		for b.Loop() {
			_ = ICRC(pkt)
		}
	})
}

func BenchmarkVerifyICRC(b *testing.B) {
	_, pkt := benchPacket(b, false)
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		if err := VerifyICRC(pkt); err != nil {
			b.Fatal(err)
		}
	}
}
