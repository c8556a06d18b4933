package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"
)

// TestWriteRead writes packets with both timestamp resolutions and reads
// them back.
func TestWriteRead(t *testing.T) {
	ts := []time.Time{
		time.Unix(1700000000, 123456789),
		time.Unix(1700000001, 0),
		time.Unix(1700000002, 999999999),
	}
	data := [][]byte{{1, 2, 3}, {}, bytes.Repeat([]byte{0xab}, 1500)}
	for _, nano := range []bool{false, true} {
		var buf bytes.Buffer
		var w *Writer
		var err error
		if nano {
			w, err = NewWriterNanosecond(&buf, LinkTypeRaw)
		} else {
			w, err = NewWriter(&buf, LinkTypeRaw)
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range data {
			if err := w.WritePacket(ts[i], data[i]); err != nil {
				t.Fatal(err)
			}
		}
		wantMagic := uint32(0xa1b2c3d4)
		if nano {
			wantMagic = 0xa1b23c4d
		}
		if m := binary.LittleEndian.Uint32(buf.Bytes()); m != wantMagic {
			t.Errorf("nano=%v: magic %#x", nano, m)
		}
		r, err := NewReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if r.LinkType() != LinkTypeRaw || r.Nanosecond() != nano {
			t.Errorf("nano=%v: link type %d, nanosecond %v", nano, r.LinkType(), r.Nanosecond())
		}
		for i := range data {
			got, lt, err := r.Next()
			if err != nil {
				t.Fatalf("nano=%v record %d: %v", nano, i, err)
			}
			want := ts[i]
			if !nano {
				want = want.Truncate(time.Microsecond)
			}
			if !bytes.Equal(got, data[i]) || lt != LinkTypeRaw || !r.Timestamp().Equal(want) || r.OrigLen() != len(data[i]) {
				t.Errorf("nano=%v record %d: %d bytes, link %d, time %v (want %v), orig %d",
					nano, i, len(got), lt, r.Timestamp(), want, r.OrigLen())
			}
		}
		if _, _, err := r.Next(); err != io.EOF {
			t.Errorf("nano=%v: at end: %v, want io.EOF", nano, err)
		}
	}
}

// TestReadBigEndian reads a hand-made big-endian file of each resolution.
func TestReadBigEndian(t *testing.T) {
	for _, magic := range []uint32{magicMicro, magicNano} {
		be := binary.BigEndian
		f := make([]byte, 24+16+4)
		be.PutUint32(f[0:], magic)
		be.PutUint16(f[4:], 2)
		be.PutUint16(f[6:], 4)
		be.PutUint32(f[16:], 65535)
		be.PutUint32(f[20:], LinkTypeEthernet)
		be.PutUint32(f[24:], 10)  // seconds
		be.PutUint32(f[28:], 500) // µs or ns
		be.PutUint32(f[32:], 4)
		be.PutUint32(f[36:], 60)
		copy(f[40:], "abcd")
		r, err := NewReader(bytes.NewReader(f))
		if err != nil {
			t.Fatal(err)
		}
		data, lt, err := r.Next()
		want := time.Unix(10, 500)
		if magic == magicMicro {
			want = time.Unix(10, 500000)
		}
		if err != nil || string(data) != "abcd" || lt != LinkTypeEthernet || r.OrigLen() != 60 || !r.Timestamp().Equal(want) {
			t.Errorf("magic %#x: %q %d %v orig %d time %v", magic, data, lt, err, r.OrigLen(), r.Timestamp())
		}
	}
}

// TestReadBad checks the Reader's errors on broken files.
func TestReadBad(t *testing.T) {
	var good bytes.Buffer
	w, _ := NewWriter(&good, LinkTypeEthernet)
	_ = w.WritePacket(time.Unix(1, 0), make([]byte, 100))
	g := good.Bytes()

	if _, err := NewReader(bytes.NewReader(g[:10])); err == nil {
		t.Error("short file header accepted")
	}
	pcapng := append([]byte{0x0a, 0x0d, 0x0d, 0x0a}, g[4:]...)
	if _, err := NewReader(bytes.NewReader(pcapng)); !errors.Is(err, ErrFormat) {
		t.Errorf("pcapng: %v, want ErrFormat", err)
	}
	v3 := bytes.Clone(g)
	v3[4] = 3
	if _, err := NewReader(bytes.NewReader(v3)); !errors.Is(err, ErrFormat) {
		t.Errorf("version 3: %v, want ErrFormat", err)
	}
	for _, n := range []int{24 + 8, 24 + 16 + 50} {
		r, err := NewReader(bytes.NewReader(g[:n]))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
	huge := bytes.Clone(g)
	binary.LittleEndian.PutUint32(huge[24+8:], 1<<30)
	r, _ := NewReader(bytes.NewReader(huge))
	if _, _, err := r.Next(); !errors.Is(err, ErrFormat) {
		t.Errorf("1 GiB record: %v, want ErrFormat", err)
	}
}

// TestWriteSnaplen checks that an oversized packet is cut to the snapshot
// length with its original length kept.
func TestWriteSnaplen(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, LinkTypeRaw)
	if err := w.WritePacket(time.Unix(0, 0), make([]byte, DefaultSnaplen+10)); err != nil {
		t.Fatal(err)
	}
	r, _ := NewReader(&buf)
	data, _, err := r.Next()
	if err != nil || len(data) != DefaultSnaplen || r.OrigLen() != DefaultSnaplen+10 {
		t.Errorf("%v: %d bytes, orig %d", err, len(data), r.OrigLen())
	}
}

func TestIPPayloadOfFrame(t *testing.T) {
	ip4 := make([]byte, 28)
	ip4[0] = 0x45
	binary.BigEndian.PutUint16(ip4[2:], 28)
	ip6 := make([]byte, 48)
	ip6[0] = 0x60
	binary.BigEndian.PutUint16(ip6[4:], 8)
	eth := func(et uint16, tail []byte) []byte {
		b := make([]byte, 12, 14+len(tail))
		b = binary.BigEndian.AppendUint16(b, et)
		return append(b, tail...)
	}
	vlan := func(outer, et uint16, tail []byte) []byte {
		b := make([]byte, 12)
		b = binary.BigEndian.AppendUint16(b, outer)
		b = append(b, 0x00, 0x05)
		b = binary.BigEndian.AppendUint16(b, et)
		return append(b, tail...)
	}
	sll := func(et uint16, tail []byte) []byte {
		b := make([]byte, 14)
		b = binary.BigEndian.AppendUint16(b, et)
		return append(b, tail...)
	}
	padded := append(bytes.Clone(ip4), make([]byte, 18)...) // Ethernet minimum-size padding
	long := bytes.Clone(ip4)
	binary.BigEndian.PutUint16(long[2:], 100) // claims more than there is
	tests := []struct {
		name  string
		lt    int
		frame []byte
		want  []byte
		ok    bool
	}{
		{"Ethernet IPv4", LinkTypeEthernet, eth(0x0800, ip4), ip4, true},
		{"Ethernet IPv6", LinkTypeEthernet, eth(0x86dd, ip6), ip6, true},
		{"Ethernet IPv4 with pad", LinkTypeEthernet, eth(0x0800, padded), ip4, true},
		{"Ethernet IPv6 with pad", LinkTypeEthernet, eth(0x86dd, append(bytes.Clone(ip6), 0, 0)), ip6, true},
		{"Ethernet IPv4 length too big", LinkTypeEthernet, eth(0x0800, long), long, true},
		{"802.1Q IPv4", LinkTypeEthernet, vlan(0x8100, 0x0800, ip4), ip4, true},
		{"802.1ad IPv6", LinkTypeEthernet, vlan(0x88a8, 0x86dd, ip6), ip6, true},
		{"802.1Q ARP", LinkTypeEthernet, vlan(0x8100, 0x0806, ip4), nil, false},
		{"802.1Q cut", LinkTypeEthernet, vlan(0x8100, 0x0800, nil)[:16], nil, false},
		{"ARP", LinkTypeEthernet, eth(0x0806, ip4), nil, false},
		{"Ethernet IPv4 type, IPv6 inside", LinkTypeEthernet, eth(0x0800, ip6), nil, false},
		{"Ethernet empty IP", LinkTypeEthernet, eth(0x0800, nil), nil, false},
		{"Ethernet short", LinkTypeEthernet, make([]byte, 13), nil, false},
		{"raw IPv4", LinkTypeRaw, ip4, ip4, true},
		{"raw IPv6", LinkTypeRaw, ip6, ip6, true},
		{"raw IPv4 link type 228", LinkTypeIPv4, ip4, ip4, true},
		{"raw version 5", LinkTypeRaw, []byte{0x50, 0, 0}, nil, false},
		{"raw empty", LinkTypeRaw, nil, nil, false},
		{"SLL IPv4", LinkTypeLinuxSLL, sll(0x0800, ip4), ip4, true},
		{"SLL IPv6", LinkTypeLinuxSLL, sll(0x86dd, ip6), ip6, true},
		{"SLL short", LinkTypeLinuxSLL, make([]byte, 15), nil, false},
		{"unknown link type", 147, ip4, nil, false},
	}
	for _, tt := range tests {
		got, ok := IPPayloadOfFrame(tt.lt, tt.frame)
		if ok != tt.ok || !bytes.Equal(got, tt.want) {
			t.Errorf("%s: %x %v, want %x %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestNextNoAlloc checks that reading records reuses the buffer.
func TestNextNoAlloc(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, LinkTypeEthernet)
	for range 200 {
		_ = w.WritePacket(time.Unix(1, 0), make([]byte, 1000))
	}
	r, _ := NewReader(bytes.NewReader(buf.Bytes()))
	_, _, _ = r.Next()
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per Next", n)
	}
}
