package wire

import (
	"bytes"
	"errors"
	"testing"
)

// XRC (IBTA 9.3.1): requests carry the 4-byte XRCETH, the 24-bit number of
// the receiver's XRC SRQ, after the BTH and before a RETH or AtomicETH;
// responses carry none.
func TestXRCETH(t *testing.T) {
	cases := []struct {
		name   string
		op     Opcode
		hasX   bool
		xrcOff int // offset of the XRCETH after the BTH; -1 none
	}{
		{"SEND Only", TransportXRC | OpSendOnly, true, 0},
		{"SEND Only with Immediate", TransportXRC | OpSendOnlyImm, true, 0},
		{"RDMA WRITE First: XRCETH then RETH", TransportXRC | OpWriteFirst, true, 0},
		{"RDMA READ Request", TransportXRC | OpReadRequest, true, 0},
		{"CmpSwap: XRCETH then AtomicETH", TransportXRC | OpCompareSwap, true, 0},
		{"SEND Only with Invalidate", TransportXRC | OpSendOnlyInv, true, 0},
		{"Acknowledge has no XRCETH", TransportXRC | OpAcknowledge, false, -1},
		{"READ Response Only has no XRCETH", TransportXRC | OpReadResponseOnly, false, -1},
		{"RC SEND Only has no XRCETH", TransportRC | OpSendOnly, false, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.op.Flags()&HasXRCETH != 0; got != c.hasX {
				t.Fatalf("%v: HasXRCETH %v, want %v", c.op, got, c.hasX)
			}
			p := samplePacket(c.op, false, []byte("data"))
			p.XRCETH = XRCETH{}
			if c.hasX {
				p.XRCETH.SRQN = 0x00c0ffee
			}
			b := Append(nil, &p)
			var q Packet
			if err := Decode(b, &q); err != nil {
				t.Fatal(err)
			}
			if q.XRCETH != p.XRCETH || q.RETH != p.RETH || q.Atomic != p.Atomic || !bytes.Equal(q.Payload, p.Payload) {
				t.Fatalf("decoded %+v, sent %+v", q, p)
			}
			if c.xrcOff >= 0 {
				x := b[20+udpLen+bthLen+c.xrcOff:]
				if !bytes.Equal(x[:4], []byte{0, 0xc0, 0xff, 0xee}) {
					t.Fatalf("XRCETH bytes %x", x[:4])
				}
				// Cut inside the XRCETH: too short for the opcode's headers.
				cut := bytes.Clone(b[:20+udpLen+bthLen+2])
				if err := DecodeTransport(cut[20+udpLen:], &q); err == nil {
					t.Fatal("a packet cut inside its XRCETH decoded")
				}
			}
		})
	}
}

// The header view: ParseXRCETH reads what Append writes, ignores the
// reserved byte, masks the number to 24 bits and refuses short input.
func TestXRCETHView(t *testing.T) {
	cases := []struct {
		in      []byte
		want    XRCETH
		wantErr error
	}{
		{[]byte{0, 0, 0, 1}, XRCETH{SRQN: 1}, nil},
		{[]byte{0xff, 0x12, 0x34, 0x56, 9}, XRCETH{SRQN: 0x123456}, nil}, // reserved byte ignored
		{[]byte{0, 0, 1}, XRCETH{}, ErrXRCETHShort},
		{nil, XRCETH{}, ErrXRCETHShort},
	}
	for _, c := range cases {
		got, err := ParseXRCETH(c.in)
		if got != c.want || !errors.Is(err, c.wantErr) {
			t.Errorf("ParseXRCETH(%x) = %+v, %v; want %+v, %v", c.in, got, err, c.want, c.wantErr)
		}
	}
	if b := (XRCETH{SRQN: 0xff123456}).Append([]byte{7}); !bytes.Equal(b, []byte{7, 0, 0x12, 0x34, 0x56}) {
		t.Errorf("Append = %x", b)
	}
}

// FuzzXRCETH: for any input ParseXRCETH never panics, and what it accepts
// re-appends to the input with the reserved byte zeroed.
func FuzzXRCETH(f *testing.F) {
	f.Add([]byte{0, 0xab, 0xcd, 0xef})
	f.Add([]byte{1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := ParseXRCETH(b)
		if err != nil {
			if len(b) >= 4 {
				t.Fatalf("refused %d bytes: %v", len(b), err)
			}
			return
		}
		want := append([]byte{0}, b[1:4]...)
		if got := x.Append(nil); !bytes.Equal(got, want) {
			t.Fatalf("Append %x, want %x", got, want)
		}
	})
}
