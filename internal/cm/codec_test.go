package cm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

var (
	gidA = [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 1}
	gidB = [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 2}
)

func fullREQ() *REQ {
	return &REQ{LocalID: 0x01020304, SrcPort: 40000, DstPort: 7471, QPType: QPTypeRC, MTU: 3,
		ResponderResources: 16, InitiatorDepth: 8, QPN: 0x123456, PSN: 0xabcdef, TimeoutMillis: 5000,
		SrcGID: gidA, DstGID: gidB, PrivateData: bytes.Repeat([]byte{0x5a}, 56)}
}

// messages has every type, each with empty and with largest private data.
func messages() []Message {
	return []Message{
		fullREQ(),
		&REQ{LocalID: 1, DstPort: 1, QPType: QPTypeUC, MTU: 5},
		&REP{LocalID: 9, RemoteID: 1, MTU: 1, ResponderResources: 1, InitiatorDepth: 2, QPN: Max24, PSN: 0, GID: gidB,
			PrivateData: bytes.Repeat([]byte{1}, 196)},
		&REP{LocalID: 9, RemoteID: 1, MTU: 5},
		&RTU{LocalID: 1, RemoteID: 9, PrivateData: bytes.Repeat([]byte{2}, 224)},
		&RTU{LocalID: 1, RemoteID: 9},
		&REJ{LocalID: 0, RemoteID: 1, Reason: RejectInvalidServiceID, Text: "no listener on port 7471"},
		&REJ{LocalID: 9, RemoteID: 1, Reason: RejectConsumer, Text: strings.Repeat("é", MaxRejectText/2),
			PrivateData: bytes.Repeat([]byte{3}, 148)},
		&DREQ{LocalID: 1, RemoteID: 9, PrivateData: bytes.Repeat([]byte{4}, 220)},
		&DREQ{LocalID: 1, RemoteID: 9},
		&REJ{LocalID: 1, Reason: RejectTimeout, Text: "the requester gave up"},
		&DREP{LocalID: 9, RemoteID: 1, PrivateData: []byte("bye")},
		&DREP{LocalID: 0xFFFFFFFF, RemoteID: 0xFFFFFFFF},
	}
}

func mustAppend(t testing.TB, m Message) []byte {
	t.Helper()
	b, err := m.Append(nil)
	if err != nil {
		t.Fatalf("%v: %v", m.Type(), err)
	}
	return b
}

func TestCMRoundTrip(t *testing.T) {
	for _, m := range messages() {
		t.Run(m.Type().String(), func(t *testing.T) {
			prefix := []byte("xyz")
			b, err := m.Append(prefix)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b[:3], prefix) {
				t.Fatal("Append overwrote what b held")
			}
			frame := b[3:]
			got, n, err := Parse(frame)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(frame) {
				t.Fatalf("Parse took %d of %d bytes", n, len(frame))
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip\n got %+v\nwant %+v", got, m)
			}
			var buf [MaxFrame]byte
			got2, err := ReadFrame(bytes.NewReader(frame), &buf)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got2, m) {
				t.Fatalf("ReadFrame\n got %+v\nwant %+v", got2, m)
			}
			if l, r := got.IDs(); l == 0 && r == 0 {
				t.Fatal("IDs returned none")
			}
		})
	}
}

// The layout as doc.go and req.go draw it, byte for byte.
func TestCMREQLayout(t *testing.T) {
	m := fullREQ()
	m.PrivateData = []byte{0xAA, 0xBB}
	b := mustAppend(t, m)
	want := []byte{'v', 'C', 1, 1, 0, 63, // header: body of 61 + 2 bytes
		1, 2, 3, 4, 0, 0, 0, 0, // ids
		0x9c, 0x40, 0x1d, 0x2f, // ports 40000, 7471
		2, 3, 16, 8, // RC, MTU 1024, 16, 8
		0, 0x12, 0x34, 0x56, 0, 0xab, 0xcd, 0xef, // QPN, PSN
		0, 0, 0x13, 0x88} // 5000 ms
	want = append(want, gidA[:]...)
	want = append(want, gidB[:]...)
	want = append(want, 2, 0xAA, 0xBB)
	if !bytes.Equal(b, want) {
		t.Fatalf("REQ\n got %x\nwant %x", b, want)
	}
}

func TestCMREJLayout(t *testing.T) {
	b := mustAppend(t, &REJ{RemoteID: 7, Reason: RejectInvalidServiceID, Text: "no", PrivateData: []byte{9}})
	want := []byte{'v', 'C', 1, 4, 0, 15, 0, 0, 0, 0, 0, 0, 0, 7, 0, 8, 2, 'n', 'o', 1, 9}
	if !bytes.Equal(b, want) {
		t.Fatalf("REJ\n got %x\nwant %x", b, want)
	}
}

func TestCMAppendRefuses(t *testing.T) {
	big := func(n int) []byte { return make([]byte, n) }
	cases := []struct {
		name string
		m    Message
		want error
		msg  string
	}{
		{"REQ private data 57", &REQ{LocalID: 1, QPType: QPTypeRC, MTU: 3, PrivateData: big(57)}, ErrPrivateData, "57 bytes is above 56"},
		{"REP private data 197", &REP{LocalID: 1, RemoteID: 2, MTU: 3, PrivateData: big(197)}, ErrPrivateData, "above 196"},
		{"RTU private data 225", &RTU{LocalID: 1, RemoteID: 2, PrivateData: big(225)}, ErrPrivateData, "above 224"},
		{"REJ private data 149", &REJ{RemoteID: 2, PrivateData: big(149)}, ErrPrivateData, "above 148"},
		{"DREQ private data 221", &DREQ{LocalID: 1, RemoteID: 2, PrivateData: big(221)}, ErrPrivateData, "above 220"},
		{"DREP private data 221", &DREP{LocalID: 1, RemoteID: 2, PrivateData: big(221)}, ErrPrivateData, "above 220"},
		{"REJ text 129", &REJ{RemoteID: 2, Text: strings.Repeat("x", 129)}, ErrMalformed, "text of 129 bytes"},
		{"REJ text not UTF-8", &REJ{RemoteID: 2, Text: "\xff"}, ErrMalformed, "UTF-8"},
		{"REQ QPN 25 bits", &REQ{LocalID: 1, QPType: QPTypeRC, MTU: 3, QPN: 1 << 24}, ErrMalformed, "QPN"},
		{"REP PSN 25 bits", &REP{LocalID: 1, RemoteID: 2, MTU: 3, PSN: 1 << 24}, ErrMalformed, "PSN"},
		{"REQ UD", &REQ{LocalID: 1, QPType: 4, MTU: 3}, ErrMalformed, "QP type 4"},
		{"REQ MTU 0", &REQ{LocalID: 1, QPType: QPTypeRC}, ErrMalformed, "MTU 0"},
		{"REP MTU 6", &REP{LocalID: 1, RemoteID: 2, MTU: 6}, ErrMalformed, "MTU 6"},
		{"REQ no id", &REQ{QPType: QPTypeRC, MTU: 3}, ErrMalformed, "local id 0"},
		{"RTU no remote id", &RTU{LocalID: 1}, ErrMalformed, "remote id 0"},
		{"REJ no id", &REJ{}, ErrMalformed, "names no connection"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prefix := []byte("keep")
			b, err := c.m.Append(prefix)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, c.want, c.msg)
			}
			if string(b) != "keep" {
				t.Fatalf("a refused Append returned %q", b)
			}
			var pe *ProtocolError
			if !errors.As(err, &pe) || pe.Type != c.m.Type() {
				t.Fatalf("err %v is not a *ProtocolError of %v", err, c.m.Type())
			}
		})
	}
}

// frame builds a frame of type t with body, its length field set to n
// (negative: the body's length).
func frame(t Type, body []byte, n int) []byte {
	if n < 0 {
		n = len(body)
	}
	b := []byte{'v', 'C', Version, byte(t), 0, 0}
	binary.BigEndian.PutUint16(b[4:], uint16(n))
	return append(b, body...)
}

// body returns the body of m's frame.
func body(t testing.TB, m Message) []byte { return mustAppend(t, m)[HeaderSize:] }

func TestCMParseRefuses(t *testing.T) {
	req := body(t, fullREQ())
	rep := body(t, &REP{LocalID: 9, RemoteID: 1, MTU: 3, PrivateData: []byte{1}})
	rej := body(t, &REJ{RemoteID: 1, Reason: RejectConsumer, Text: "no", PrivateData: []byte{1}})
	rtu := body(t, &RTU{LocalID: 1, RemoteID: 9})
	set := func(b []byte, off int, v ...byte) []byte {
		c := append([]byte(nil), b...)
		copy(c[off:], v)
		return c
	}
	cases := []struct {
		name  string
		frame []byte
		want  error
		msg   string
	}{
		{"empty", nil, ErrTruncated, "0 of the header's 6 bytes"},
		{"half a header", []byte{'v', 'C', 1}, ErrTruncated, "header"},
		{"bad magic", set(frame(TypeRTU, rtu, -1), 0, 'x'), ErrMagic, ""},
		{"http", []byte("GET / HTTP/1.1\r\n\r\n"), ErrMagic, ""},
		{"tls", []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}, ErrMagic, ""},
		{"version 0", set(frame(TypeRTU, rtu, -1), 2, 0), ErrVersion, "version 0"},
		{"version 2", set(frame(TypeRTU, rtu, -1), 2, 2), ErrVersion, "same release"},
		{"type 0", frame(0, rtu, -1), ErrType, "type 0"},
		{"type 7", frame(7, rtu, -1), ErrType, "type 7"},
		{"type 255", frame(255, rtu, -1), ErrType, ""},
		{"length 513", frame(TypeRTU, make([]byte, 513), -1), ErrTooLong, "513 is above 512"},
		{"length 65535", frame(TypeRTU, rtu, 0xFFFF), ErrTooLong, "65535"},
		{"body shorter than its length", frame(TypeRTU, rtu, len(rtu)+1), ErrTruncated, "of the body's"},
		{"empty body", frame(TypeRTU, nil, -1), ErrMalformed, "local id"},
		{"REQ cut in the GIDs", frame(TypeREQ, req[:40], -1), ErrMalformed, "source GID"},
		{"REQ without private data length", frame(TypeREQ, req[:60], -1), ErrMalformed, "private data length"},
		{"REQ private data longer than the body", frame(TypeREQ, set(req, 60, 57)[:61+20], -1), ErrPrivateData, "57 bytes is above 56"},
		{"REQ private data cut", frame(TypeREQ, req[:61+10], -1), ErrMalformed, "inside private data"},
		{"REQ trailing byte", frame(TypeREQ, append(append([]byte(nil), req...), 0), -1), ErrMalformed, "1 bytes after"},
		{"REQ remote id set", frame(TypeREQ, set(req, 7, 1), -1), ErrMalformed, "REQ carries remote id"},
		{"REQ local id 0", frame(TypeREQ, set(req, 0, 0, 0, 0, 0), -1), ErrMalformed, "local id 0"},
		{"REQ UD", frame(TypeREQ, set(req, 12, 4), -1), ErrMalformed, "QP type 4"},
		{"REQ MTU 9", frame(TypeREQ, set(req, 13, 9), -1), ErrMalformed, "MTU 9"},
		{"REQ QPN 32 bits", frame(TypeREQ, set(req, 16, 0xFF), -1), ErrMalformed, "QPN"},
		{"REQ PSN 32 bits", frame(TypeREQ, set(req, 20, 0x01), -1), ErrMalformed, "PSN"},
		{"REP reserved byte", frame(TypeREP, set(rep, 11, 1), -1), ErrMalformed, "reserved"},
		{"REP remote id 0", frame(TypeREP, set(rep, 4, 0, 0, 0, 0), -1), ErrMalformed, "remote id 0"},
		{"REP MTU 0", frame(TypeREP, set(rep, 8, 0), -1), ErrMalformed, "MTU 0"},
		{"REP private data 197", frame(TypeREP, set(rep, 36, 197), -1), ErrPrivateData, "197"},
		{"REJ text 129", frame(TypeREJ, set(rej, 10, 129), -1), ErrMalformed, "text of 129"},
		{"REJ text not UTF-8", frame(TypeREJ, set(rej, 11, 0xff), -1), ErrMalformed, "UTF-8"},
		{"REJ without ids", frame(TypeREJ, set(rej, 0, 0, 0, 0, 0, 0, 0, 0, 0), -1), ErrMalformed, "names no connection"},
		{"RTU private data 225", frame(TypeRTU, append(append([]byte(nil), rtu[:8]...), 225), -1), ErrPrivateData, "225"},
		{"DREQ of 3 bytes", frame(TypeDREQ, []byte{1, 2, 3}, -1), ErrMalformed, "local id"},
		{"DREP without private data length", frame(TypeDREP, rtu[:8], -1), ErrMalformed, "private data length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, n, err := Parse(c.frame)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, c.want, c.msg)
			}
			if m != nil || n != 0 {
				t.Fatalf("a refused frame gave %+v, %d", m, n)
			}
			var buf [MaxFrame]byte
			_, err = ReadFrame(bytes.NewReader(c.frame), &buf)
			if c.frame == nil {
				if err != io.EOF {
					t.Fatalf("ReadFrame of nothing: %v, want io.EOF", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("ReadFrame: err = %v, want %v", err, c.want)
			}
		})
	}
}

// ReadFrame checks the header before it reads a body: an oversized length
// is refused without waiting for bytes that never come.
func TestCMReadFrameChecksHeaderFirst(t *testing.T) {
	r, w := io.Pipe()
	defer r.Close()
	go func() { _, _ = w.Write([]byte{'v', 'C', 1, 3, 0xFF, 0xFF}) }()
	var buf [MaxFrame]byte
	if _, err := ReadFrame(r, &buf); !errors.Is(err, ErrTooLong) {
		t.Fatalf("err = %v, want ErrTooLong", err)
	}
}

func TestCMReadFrameStream(t *testing.T) {
	var stream []byte
	for _, m := range messages() {
		stream = append(stream, mustAppend(t, m)...)
	}
	r := bytes.NewReader(stream)
	var buf [MaxFrame]byte
	for i, want := range messages() {
		got, err := ReadFrame(r, &buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("frame %d: got %+v, want %+v", i, got, want)
		}
	}
	if _, err := ReadFrame(r, &buf); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	// A stream that ends inside a frame.
	for _, cut := range []int{1, HeaderSize - 1, HeaderSize, HeaderSize + 3} {
		_, err := ReadFrame(bytes.NewReader(stream[:cut]), &buf)
		if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "stream ended") {
			t.Fatalf("cut at %d: %v, want ErrTruncated", cut, err)
		}
	}
}

// Parsed private data does not alias the frame: the daemon reuses its
// read buffer.
func TestCMParseCopies(t *testing.T) {
	b := mustAppend(t, &DREQ{LocalID: 1, RemoteID: 2, PrivateData: []byte("abc")})
	m, _, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if got := m.(*DREQ).PrivateData; string(got) != "abc" {
		t.Fatalf("private data %q changed with the frame", got)
	}
}

func TestCMNames(t *testing.T) {
	for ty := TypeREQ; ty < typeMax; ty++ {
		if strings.HasPrefix(ty.String(), "type(") || MaxPrivateData(ty) == 0 {
			t.Errorf("type %d: %q, private data %d", ty, ty, MaxPrivateData(ty))
		}
	}
	if Type(0).String() != "type(0)" || MaxPrivateData(0) != 0 {
		t.Error("type 0")
	}
	if RejectInvalidServiceID.String() != "no listener" || Reason(999).String() != "reason 999" {
		t.Errorf("reasons: %q %q", RejectInvalidServiceID, Reason(999))
	}
	e := &ProtocolError{Err: ErrMagic}
	if e.Error() != ErrMagic.Error() {
		t.Errorf("%q", e)
	}
}
