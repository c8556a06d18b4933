package abi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

var allOpcodes = []Opcode{OpRDMAWrite, OpRDMAWriteImm, OpSend, OpSendImm, OpRDMARead, OpAtomicCmpAndSwp, OpAtomicFetchAndAdd}

var allQPTypes = []QPType{QPTypeRC, QPTypeUC, QPTypeUD}

// sampleSGL returns n distinct scatter/gather entries.
func sampleSGL(n int) []SGE {
	sgl := make([]SGE, n)
	for i := range sgl {
		sgl[i] = SGE{Addr: 0x1000_0000_0000 + uint64(i)*0x1_0000, Length: uint32(64 + i), LKey: uint32(0xA000 + i)}
	}
	return sgl
}

func sampleSendWQE(op Opcode, flags SendFlags) SendWQE {
	return SendWQE{
		WRID: 0xDEADBEEF_CAFEF00D, Opcode: op, Flags: flags, Imm: 0x01020304,
		RemoteAddr: 0x7FFF_0000_1234, RKey: 0x55AA, CompareAdd: 0x1111_2222_3333_4444,
		Swap: 0x5555_6666_7777_8888, AH: 7, RemoteQPN: 0xABCDEF, RemoteQKey: 0x11111111,
	}
}

// headerEqual compares the fixed part of two send WQEs.
func headerEqual(a, b *SendWQE) bool {
	return a.WRID == b.WRID && a.Opcode == b.Opcode && a.Flags == b.Flags && a.Imm == b.Imm &&
		a.RemoteAddr == b.RemoteAddr && a.RKey == b.RKey && a.CompareAdd == b.CompareAdd &&
		a.Swap == b.Swap && a.AH == b.AH && a.RemoteQPN == b.RemoteQPN && a.RemoteQKey == b.RemoteQKey
}

func TestSendWQERoundTripSGL(t *testing.T) {
	for _, typ := range allQPTypes {
		for _, op := range allOpcodes {
			if !op.AllowedOn(typ) {
				continue
			}
			for n := 0; n <= MaxSGE; n++ {
				t.Run(fmt.Sprintf("%v/%v/sge=%d", typ, op, n), func(t *testing.T) {
					in := sampleSendWQE(op, SendSignaled|SendSolicited)
					sgl := sampleSGL(n)
					b := make([]byte, SendStride(MaxSGE, 0))
					if err := PutSendWQE(b, &in, sgl, nil); err != nil {
						t.Fatalf("PutSendWQE: %v", err)
					}
					var out SendWQE
					if err := ParseSendWQE(b, &out, typ, MaxSGE, 0); err != nil {
						t.Fatalf("ParseSendWQE: %v", err)
					}
					if !headerEqual(&in, &out) {
						t.Fatalf("header: got %+v, want %+v", out, in)
					}
					if out.NumSGE != n {
						t.Fatalf("NumSGE = %d, want %d", out.NumSGE, n)
					}
					for i := 0; i < n; i++ {
						if out.SGL[i] != sgl[i] {
							t.Errorf("SGL[%d] = %+v, want %+v", i, out.SGL[i], sgl[i])
						}
					}
					if out.Inline != nil {
						t.Errorf("Inline = %q, want nil without SendInline", out.Inline)
					}
				})
			}
		}
	}
}

func TestSendWQERoundTripInline(t *testing.T) {
	const maxInline = 256
	for _, typ := range allQPTypes {
		for _, op := range allOpcodes {
			if !op.AllowedOn(typ) || op == OpRDMARead || op.IsAtomic() {
				continue
			}
			for _, n := range []int{0, 1, 63, 64, maxInline} {
				t.Run(fmt.Sprintf("%v/%v/inline=%d", typ, op, n), func(t *testing.T) {
					in := sampleSendWQE(op, SendInline|SendSignaled)
					data := make([]byte, n)
					for i := range data {
						data[i] = byte(i*7 + 3)
					}
					b := make([]byte, SendStride(0, maxInline))
					if err := PutSendWQE(b, &in, nil, data); err != nil {
						t.Fatalf("PutSendWQE: %v", err)
					}
					var out SendWQE
					if err := ParseSendWQE(b, &out, typ, 0, maxInline); err != nil {
						t.Fatalf("ParseSendWQE: %v", err)
					}
					if !headerEqual(&in, &out) {
						t.Fatalf("header: got %+v, want %+v", out, in)
					}
					if !bytes.Equal(out.Inline, data) || len(out.Inline) != n {
						t.Fatalf("Inline = %x, want %x", out.Inline, data)
					}
					if out.NumSGE != 0 {
						t.Errorf("NumSGE = %d, want 0 for inline", out.NumSGE)
					}
				})
			}
		}
	}
}

// TestParseSendWQEOpcodeAllowed checks the IBTA opcode table: UC has no READ
// or atomics, UD has only SEND, memory-window operations and SEND_WITH_INV
// are RC's and UC's (as rxe's), ATOMIC_WRITE is RC's only, unknown opcodes are
// refused everywhere.
func TestParseSendWQEOpcodeAllowed(t *testing.T) {
	allowed := map[QPType][]Opcode{
		QPTypeRC: append(append([]Opcode(nil), allOpcodes...), OpLocalInv, OpBindMW, OpSendInv, OpAtomicWrite),
		QPTypeUC: {OpRDMAWrite, OpRDMAWriteImm, OpSend, OpSendImm, OpLocalInv, OpBindMW, OpSendInv},
		QPTypeUD: {OpSend, OpSendImm},
	}
	for _, typ := range []QPType{QPTypeRC, QPTypeUC, QPTypeUD, 0, 1, 5, 255} {
		for op := 0; op < 256; op++ {
			want := false
			for _, a := range allowed[typ] {
				if Opcode(op) == a {
					want = true
				}
			}
			if got := Opcode(op).AllowedOn(typ); got != want {
				t.Errorf("%v.AllowedOn(%v) = %v, want %v", Opcode(op), typ, got, want)
			}
			in := sampleSendWQE(Opcode(op), 0)
			b := make([]byte, SendWQEHeader)
			if err := PutSendWQE(b, &in, nil, nil); err != nil {
				t.Fatal(err)
			}
			var out SendWQE
			err := ParseSendWQE(b, &out, typ, 4, 64)
			if want && err != nil {
				t.Errorf("%v on %v: %v, want success", Opcode(op), typ, err)
			}
			if !want && !errors.Is(err, ErrBadOpcode) {
				t.Errorf("%v on %v: err = %v, want ErrBadOpcode", Opcode(op), typ, err)
			}
		}
	}
}

func TestParseSendWQERejects(t *testing.T) {
	le := binary.LittleEndian
	entry := func(op Opcode, flags SendFlags, numSGE byte, inlineLen uint32, size int) []byte {
		b := make([]byte, size)
		b[SendOpcodeOff] = byte(op)
		b[SendFlagsOff] = byte(flags)
		b[SendNumSGEOff] = numSGE
		le.PutUint32(b[SendInlineLenOff:], inlineLen)
		return b
	}
	big := SendWQEHeader + MaxSGE*SGESize + 512
	tests := []struct {
		name      string
		b         []byte
		typ       QPType
		maxSGE    int
		maxInline int
		want      error
	}{
		{"empty", nil, QPTypeRC, 4, 64, ErrShortEntry},
		{"short header", make([]byte, SendWQEHeader-1), QPTypeRC, 4, 64, ErrShortEntry},
		{"read on UC", entry(OpRDMARead, 0, 0, 0, big), QPTypeUC, 4, 64, ErrBadOpcode},
		{"atomic on UC", entry(OpAtomicCmpAndSwp, 0, 0, 0, big), QPTypeUC, 4, 64, ErrBadOpcode},
		{"write on UD", entry(OpRDMAWrite, 0, 0, 0, big), QPTypeUD, 4, 64, ErrBadOpcode},
		{"fetch-add on UD", entry(OpAtomicFetchAndAdd, 0, 0, 0, big), QPTypeUD, 4, 64, ErrBadOpcode},
		{"opcode 10", entry(10, 0, 0, 0, big), QPTypeRC, 4, 64, ErrBadOpcode},
		{"opcode 255", entry(255, 0, 0, 0, big), QPTypeRC, 4, 64, ErrBadOpcode},
		{"bad QP type", entry(OpSend, 0, 0, 0, big), QPType(8), 4, 64, ErrBadOpcode},
		{"SEND on an XRC target (it has no send queue)", entry(OpSend, 0, 0, 0, big), QPTypeXRCRecv, 4, 64, ErrBadOpcode},
		{"sge above queue max", entry(OpSend, 0, 5, 0, big), QPTypeRC, 4, 64, ErrTooManySGE},
		{"sge above MaxSGE", entry(OpSend, 0, MaxSGE+1, 0, big), QPTypeRC, 64, 64, ErrTooManySGE},
		{"sge 255", entry(OpSend, 0, 255, 0, big), QPTypeRC, 255, 64, ErrTooManySGE},
		{"sge past entry", entry(OpSend, 0, 2, 0, SendWQEHeader+SGESize), QPTypeRC, 4, 64, ErrTooManySGE},
		{"sge with negative max", entry(OpSend, 0, 1, 0, big), QPTypeRC, -1, 64, ErrTooManySGE},
		{"inline above max", entry(OpSend, SendInline, 0, 65, big), QPTypeRC, 4, 64, ErrInlineLen},
		{"inline past entry", entry(OpSend, SendInline, 0, 17, SendWQEHeader+16), QPTypeRC, 4, 64, ErrInlineLen},
		{"inline huge", entry(OpSend, SendInline, 0, 0xFFFFFFFF, big), QPTypeRC, 4, 1 << 30, ErrInlineLen},
		{"inline read", entry(OpRDMARead, SendInline, 0, 8, big), QPTypeRC, 4, 64, ErrInlineLen},
		{"inline atomic", entry(OpAtomicCmpAndSwp, SendInline, 0, 8, big), QPTypeRC, 4, 64, ErrInlineLen},
		{"inline fetch-add", entry(OpAtomicFetchAndAdd, SendInline, 0, 8, big), QPTypeRC, 4, 64, ErrInlineLen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w SendWQE
			w.NumSGE = 3
			w.Inline = []byte("stale")
			err := ParseSendWQE(tt.b, &w, tt.typ, tt.maxSGE, tt.maxInline)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.want != ErrShortEntry && (w.NumSGE != 0 || w.Inline != nil) {
				t.Errorf("a refused WQE left NumSGE=%d Inline=%q", w.NumSGE, w.Inline)
			}
		})
	}
}

func TestParseSendWQEExactFit(t *testing.T) {
	// Exactly maxSGE entries filling the entry to its last byte are accepted.
	in := sampleSendWQE(OpSend, 0)
	b := make([]byte, SendWQEHeader+4*SGESize)
	if err := PutSendWQE(b, &in, sampleSGL(4), nil); err != nil {
		t.Fatal(err)
	}
	var out SendWQE
	if err := ParseSendWQE(b, &out, QPTypeRC, 4, 0); err != nil || out.NumSGE != 4 {
		t.Fatalf("NumSGE=%d err=%v, want 4 entries", out.NumSGE, err)
	}
	// Inline data filling the entry to its last byte is accepted.
	in.Flags = SendInline
	data := bytes.Repeat([]byte{0xAB}, 4*SGESize)
	if err := PutSendWQE(b, &in, nil, data); err != nil {
		t.Fatal(err)
	}
	if err := ParseSendWQE(b, &out, QPTypeRC, 4, len(data)); err != nil || !bytes.Equal(out.Inline, data) {
		t.Fatalf("inline=%x err=%v", out.Inline, err)
	}
}

func TestPutSendWQERejects(t *testing.T) {
	in := sampleSendWQE(OpSend, 0)
	if err := PutSendWQE(make([]byte, SendWQEHeader-1), &in, nil, nil); !errors.Is(err, ErrShortEntry) {
		t.Errorf("short buffer: %v, want ErrShortEntry", err)
	}
	if err := PutSendWQE(make([]byte, SendWQEHeader+2*SGESize), &in, sampleSGL(3), nil); !errors.Is(err, ErrTooManySGE) {
		t.Errorf("SGL past the entry: %v, want ErrTooManySGE", err)
	}
	if err := PutSendWQE(make([]byte, 4096), &in, sampleSGL(MaxSGE+1), nil); !errors.Is(err, ErrTooManySGE) {
		t.Errorf("more than MaxSGE: %v, want ErrTooManySGE", err)
	}
	in.Flags = SendInline
	if err := PutSendWQE(make([]byte, SendWQEHeader+8), &in, nil, make([]byte, 9)); !errors.Is(err, ErrInlineLen) {
		t.Errorf("inline past the entry: %v, want ErrInlineLen", err)
	}
}

func TestPutSendWQEClearsStaleBytes(t *testing.T) {
	// A recycled slot full of garbage must encode exactly like a clean one.
	in := sampleSendWQE(OpSend, SendInline)
	dirty := bytes.Repeat([]byte{0xFF}, SendWQEHeader+32)
	clean := make([]byte, SendWQEHeader+32)
	if err := PutSendWQE(dirty, &in, nil, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if err := PutSendWQE(clean, &in, nil, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dirty[:SendWQEHeader], clean[:SendWQEHeader]) {
		t.Fatalf("header of a dirty slot differs:\n%x\n%x", dirty[:SendWQEHeader], clean[:SendWQEHeader])
	}
}

func TestRecvWQERoundTrip(t *testing.T) {
	for n := 0; n <= MaxSGE; n++ {
		b := make([]byte, RecvStride(MaxSGE))
		sgl := sampleSGL(n)
		if err := PutRecvWQE(b, uint64(1000+n), sgl); err != nil {
			t.Fatalf("n=%d: PutRecvWQE: %v", n, err)
		}
		var w RecvWQE
		if err := ParseRecvWQE(b, &w, MaxSGE); err != nil {
			t.Fatalf("n=%d: ParseRecvWQE: %v", n, err)
		}
		if w.WRID != uint64(1000+n) || w.NumSGE != n {
			t.Fatalf("n=%d: got wr_id=%d num_sge=%d", n, w.WRID, w.NumSGE)
		}
		for i := range sgl {
			if w.SGL[i] != sgl[i] {
				t.Errorf("n=%d: SGL[%d] = %+v, want %+v", n, i, w.SGL[i], sgl[i])
			}
		}
	}
}

func TestParseRecvWQERejects(t *testing.T) {
	entry := func(n uint32, size int) []byte {
		b := make([]byte, size)
		binary.LittleEndian.PutUint32(b[8:], n)
		return b
	}
	tests := []struct {
		name   string
		b      []byte
		maxSGE int
		want   error
	}{
		{"empty", nil, 4, ErrShortEntry},
		{"short", make([]byte, RecvWQEHeader-1), 4, ErrShortEntry},
		{"above queue max", entry(5, 1024), 4, ErrTooManySGE},
		{"above MaxSGE", entry(MaxSGE+1, 1024), 64, ErrTooManySGE},
		{"huge count", entry(0xFFFFFFFF, 1024), 1 << 30, ErrTooManySGE},
		{"count 2^31", entry(1<<31, 1024), MaxSGE, ErrTooManySGE},
		{"past entry", entry(2, RecvWQEHeader+SGESize), 4, ErrTooManySGE},
		{"negative max", entry(1, 1024), -1, ErrTooManySGE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := RecvWQE{NumSGE: 3}
			err := ParseRecvWQE(tt.b, &w, tt.maxSGE)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.want == ErrTooManySGE && w.NumSGE != 0 {
				t.Errorf("refused WQE left NumSGE = %d", w.NumSGE)
			}
		})
	}
}

func TestPutRecvWQERejects(t *testing.T) {
	if err := PutRecvWQE(make([]byte, RecvWQEHeader-1), 1, nil); err == nil {
		t.Error("short buffer accepted")
	}
	if err := PutRecvWQE(make([]byte, RecvWQEHeader+SGESize), 1, sampleSGL(2)); !errors.Is(err, ErrTooManySGE) {
		t.Errorf("SGL past the entry: %v", err)
	}
	if err := PutRecvWQE(make([]byte, 4096), 1, sampleSGL(MaxSGE+1)); !errors.Is(err, ErrTooManySGE) {
		t.Errorf("more than MaxSGE: %v", err)
	}
}

func TestCQERoundTrip(t *testing.T) {
	cases := []CQE{
		{},
		{WRID: 1, QPNum: 2, ByteLen: 3, Imm: 4, SrcQP: 5, Opcode: WCRecv, Status: StatusSuccess, Flags: WCWithImm, PKeyIndex: 6},
		{WRID: ^uint64(0), QPNum: 0xFFFFFF, ByteLen: ^uint32(0), Imm: ^uint32(0), SrcQP: 0xFFFFFF,
			Opcode: WCRecvRDMAImm, Status: StatusGeneralErr, Flags: WCWithGRH | WCWithImm, SL: 0xFF, PKeyIndex: 0xFFFF},
		{WRID: 7, Opcode: WCRecv, Flags: WCWithGRH, SL: WCSLRoCEv2IPv4},
		{WRID: 42, Opcode: WCFetchAdd, Status: StatusRemAccessErr},
	}
	for _, c := range cases {
		b := bytes.Repeat([]byte{0xEE}, CQESize)
		PutCQE(b, &c)
		if b[30] != 0 || b[31] != 0 {
			t.Errorf("%v: reserved bytes not cleared: %x", c, b)
		}
		var got CQE
		ParseCQE(b, &got)
		if got != c {
			t.Errorf("round trip: got %+v, want %+v", got, c)
		}
	}
}

func TestPutGRH(t *testing.T) {
	var sgid, dgid [16]byte
	for i := range sgid {
		sgid[i], dgid[i] = byte(i), byte(0xF0+i)
	}
	b := make([]byte, GRHSize)
	PutGRH(b, 0x1234, sgid, dgid, 64)
	if b[0] != 0x60 || binary.BigEndian.Uint16(b[4:]) != 0x1234 || b[6] != 0x1b || b[7] != 64 {
		t.Fatalf("GRH header = %x", b[:8])
	}
	if !bytes.Equal(b[8:24], sgid[:]) || !bytes.Equal(b[24:40], dgid[:]) {
		t.Fatalf("GRH GIDs = %x", b[8:])
	}
}

// seedSendWQE returns an encoded entry for the fuzz corpus.
func seedSendWQE(op Opcode, flags SendFlags, sgl []SGE, inline []byte, size int) []byte {
	w := sampleSendWQE(op, flags)
	b := make([]byte, size)
	if err := PutSendWQE(b, &w, sgl, inline); err != nil {
		panic(err)
	}
	return b
}

func FuzzParseSendWQE(f *testing.F) {
	f.Add([]byte{}, uint8(QPTypeRC), 4, 64)
	f.Add(make([]byte, SendWQEHeader), uint8(QPTypeRC), 1, 0)
	f.Add(seedSendWQE(OpSend, SendSignaled, sampleSGL(2), nil, 128), uint8(QPTypeRC), 2, 0)
	f.Add(seedSendWQE(OpRDMAWrite, 0, sampleSGL(MaxSGE), nil, SendWQEHeader+MaxSGE*SGESize), uint8(QPTypeUC), MaxSGE, 0)
	f.Add(seedSendWQE(OpSendImm, SendInline, nil, []byte("hello, inline"), 128), uint8(QPTypeUD), 1, 64)
	f.Add(seedSendWQE(OpAtomicCmpAndSwp, SendSignaled, sampleSGL(1), nil, 128), uint8(QPTypeRC), 1, 0)
	f.Add(seedSendWQE(OpRDMARead, SendInline, nil, []byte("x"), 128), uint8(QPTypeRC), 1, 64)
	f.Add(seedSendWQE(OpSend, 0, sampleSGL(3), nil, 128), uint8(QPTypeUD), 2, 0)
	f.Add(bytes.Repeat([]byte{0xFF}, 512), uint8(QPTypeRC), 255, 1<<20)
	f.Fuzz(func(t *testing.T, b []byte, typ uint8, maxSGE, maxInline int) {
		var w SendWQE
		if err := ParseSendWQE(b, &w, QPType(typ), maxSGE, maxInline); err != nil {
			if !errors.Is(err, ErrShortEntry) && !errors.Is(err, ErrBadOpcode) &&
				!errors.Is(err, ErrTooManySGE) && !errors.Is(err, ErrInlineLen) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// What was accepted is within the queue's capabilities.
		if !w.Opcode.AllowedOn(QPType(typ)) {
			t.Fatalf("accepted opcode %v on %v", w.Opcode, QPType(typ))
		}
		if w.NumSGE < 0 || w.NumSGE > MaxSGE || w.NumSGE > max(maxSGE, 0) {
			t.Fatalf("accepted %d SGEs with max %d", w.NumSGE, maxSGE)
		}
		if len(w.Inline) > max(maxInline, 0) {
			t.Fatalf("accepted %d inline bytes with max %d", len(w.Inline), maxInline)
		}
		if w.Flags&SendInline != 0 && (w.Opcode == OpRDMARead || w.Opcode.IsAtomic() || w.NumSGE != 0) {
			t.Fatalf("accepted inline %v with %d SGEs", w.Opcode, w.NumSGE)
		}
		// Re-encoding and parsing again gives the same work request.
		b2 := make([]byte, len(b))
		inline := append([]byte(nil), w.Inline...)
		if err := PutSendWQE(b2, &w, w.SGL[:w.NumSGE], inline); err != nil {
			t.Fatalf("PutSendWQE of an accepted WQE: %v", err)
		}
		var w2 SendWQE
		if err := ParseSendWQE(b2, &w2, QPType(typ), maxSGE, maxInline); err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		if !headerEqual(&w, &w2) || w.NumSGE != w2.NumSGE || w.SGL != w2.SGL || !bytes.Equal(w.Inline, w2.Inline) ||
			(w.Inline == nil) != (w2.Inline == nil) {
			t.Fatalf("round trip differs:\n%+v\n%+v", w, w2)
		}
	})
}

func FuzzParseRecvWQE(f *testing.F) {
	seed := func(n int) []byte {
		b := make([]byte, RecvStride(MaxSGE))
		if err := PutRecvWQE(b, 77, sampleSGL(n)); err != nil {
			panic(err)
		}
		return b
	}
	f.Add([]byte{}, 4)
	f.Add(make([]byte, RecvWQEHeader), 0)
	f.Add(seed(1), 1)
	f.Add(seed(4), 4)
	f.Add(seed(MaxSGE), MaxSGE)
	f.Add(seed(4), 3)
	f.Add(bytes.Repeat([]byte{0xFF}, 300), 1<<30)
	f.Fuzz(func(t *testing.T, b []byte, maxSGE int) {
		var w RecvWQE
		if err := ParseRecvWQE(b, &w, maxSGE); err != nil {
			if !errors.Is(err, ErrShortEntry) && !errors.Is(err, ErrTooManySGE) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if w.NumSGE < 0 || w.NumSGE > MaxSGE || w.NumSGE > max(maxSGE, 0) {
			t.Fatalf("accepted %d SGEs with max %d", w.NumSGE, maxSGE)
		}
		b2 := make([]byte, len(b))
		if err := PutRecvWQE(b2, w.WRID, w.SGL[:w.NumSGE]); err != nil {
			t.Fatalf("PutRecvWQE of an accepted WQE: %v", err)
		}
		var w2 RecvWQE
		if err := ParseRecvWQE(b2, &w2, maxSGE); err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		if w != w2 {
			t.Fatalf("round trip differs:\n%+v\n%+v", w, w2)
		}
	})
}

// TestEntryLayout checks that the exported field offsets, which the C library
// uses through vrdma_abi.h, describe naturally aligned, non-overlapping fields
// inside their entry.
func TestEntryLayout(t *testing.T) {
	type field struct {
		name      string
		off, size int
	}
	layouts := []struct {
		name   string
		size   int
		fields []field
	}{
		{"send WQE", SendWQEHeader, []field{
			{"wr_id", SendWRIDOff, 8}, {"opcode", SendOpcodeOff, 1}, {"flags", SendFlagsOff, 1},
			{"num_sge", SendNumSGEOff, 1}, {"imm", SendImmOff, 4}, {"remote_addr", SendRemoteAddrOff, 8},
			{"rkey", SendRKeyOff, 4}, {"inline_len", SendInlineLenOff, 4}, {"compare_add", SendCompareAddOff, 8},
			{"swap", SendSwapOff, 8}, {"ah", SendAHOff, 4}, {"remote_qpn", SendRemoteQPNOff, 4},
			{"remote_qkey", SendRemoteQKeyOff, 4},
		}},
		{"receive WQE", RecvWQEHeader, []field{{"wr_id", RecvWRIDOff, 8}, {"num_sge", RecvNumSGEOff, 4}}},
		{"SGE", SGESize, []field{{"addr", SGEAddrOff, 8}, {"length", SGELengthOff, 4}, {"lkey", SGELKeyOff, 4}}},
		{"CQE", CQESize, []field{
			{"wr_id", CQEWRIDOff, 8}, {"qp_num", CQEQPNumOff, 4}, {"byte_len", CQEByteLenOff, 4},
			{"imm", CQEImmOff, 4}, {"src_qp", CQESrcQPOff, 4}, {"opcode", CQEOpcodeOff, 1},
			{"status", CQEStatusOff, 1}, {"wc_flags", CQEFlagsOff, 1}, {"sl", CQESLOff, 1}, {"pkey_index", CQEPKeyIndexOff, 2},
		}},
		{"timestamped CQE", CQETSSize, []field{
			{"wr_id", CQEWRIDOff, 8}, {"qp_num", CQEQPNumOff, 4}, {"byte_len", CQEByteLenOff, 4},
			{"imm", CQEImmOff, 4}, {"src_qp", CQESrcQPOff, 4}, {"opcode", CQEOpcodeOff, 1},
			{"status", CQEStatusOff, 1}, {"wc_flags", CQEFlagsOff, 1}, {"sl", CQESLOff, 1}, {"pkey_index", CQEPKeyIndexOff, 2},
			{"rsvd", 30, 2}, {"timestamp", CQETimestampOff, 8}, {"wallclock", CQEWallclockOff, 8},
		}},
	}
	for _, l := range layouts {
		used := make([]string, l.size)
		for _, f := range l.fields {
			if f.off < 0 || f.off+f.size > l.size {
				t.Errorf("%s: %s at %d+%d lies outside the %d-byte entry", l.name, f.name, f.off, f.size, l.size)
				continue
			}
			if f.off%f.size != 0 {
				t.Errorf("%s: %s at %d is not aligned to its size %d", l.name, f.name, f.off, f.size)
			}
			for i := f.off; i < f.off+f.size; i++ {
				if used[i] != "" {
					t.Errorf("%s: %s overlaps %s at byte %d", l.name, f.name, used[i], i)
				}
				used[i] = f.name
			}
		}
	}
}
