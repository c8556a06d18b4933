package proto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func message(h Header, body []byte) []byte {
	h.BodyLen = uint32(len(body))
	return append(AppendHeader(nil, h), body...)
}

func TestHeaderRoundTrip(t *testing.T) {
	headers := []Header{
		{Version: Version, Kind: KindRequest, Op: OpHello, ID: 1},
		{Version: Version, Kind: KindReply, Op: OpRegMR, Code: CodeMemlock, ID: 0xFFFFFFFF},
		{Version: Version, Kind: KindEvent, Op: OpEvent},
		{Version: Version, Kind: KindRequest, Op: Op(0xFFFF), Code: Code(0xFFFF), ID: 12345},
	}
	bodies := [][]byte{nil, []byte("{}"), []byte(`{"device":"vrdma0"}`), bytes.Repeat([]byte("x"), MaxMessage-HeaderSize)}
	for _, h := range headers {
		for _, body := range bodies {
			msg := message(h, body)
			if len(msg) != HeaderSize+len(body) {
				t.Fatalf("message of %d bytes, want %d", len(msg), HeaderSize+len(body))
			}
			got, gotBody, err := ParseHeader(msg)
			if err != nil {
				t.Fatalf("%+v with %d-byte body: %v", h, len(body), err)
			}
			want := h
			want.BodyLen = uint32(len(body))
			if got != want {
				t.Errorf("header = %+v, want %+v", got, want)
			}
			if !bytes.Equal(gotBody, body) {
				t.Errorf("body of %d bytes, want %d", len(gotBody), len(body))
			}
		}
	}
}

func TestAppendHeaderLayout(t *testing.T) {
	b := AppendHeader([]byte("prefix"), Header{Version: 1, Kind: KindReply, Op: 0x0102, Code: 0x0304, ID: 0x05060708, BodyLen: 0x090A0B0C})
	want := []byte("prefix\x52\x76\x01\x02\x02\x01\x04\x03\x08\x07\x06\x05\x0C\x0B\x0A\x09")
	if !bytes.Equal(b, want) {
		t.Fatalf("AppendHeader = %x, want %x", b, want)
	}
}

func TestParseHeaderErrors(t *testing.T) {
	good := Header{Version: Version, Kind: KindRequest, Op: OpHello, ID: 7}
	mutate := func(f func(b []byte) []byte) []byte { return f(message(good, []byte("{}"))) }
	tests := []struct {
		name string
		msg  []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"one byte", []byte{0x52}, ErrShort},
		{"truncated header", message(good, nil)[:HeaderSize-1], ErrShort},
		{"too large", append(AppendHeader(nil, Header{Version: Version, Kind: KindRequest, BodyLen: MaxMessage - HeaderSize + 1}), make([]byte, MaxMessage-HeaderSize+1)...), ErrTooLarge},
		{"bad magic", mutate(func(b []byte) []byte { b[0] = 'x'; return b }), ErrMagic},
		{"swapped magic", mutate(func(b []byte) []byte { b[0], b[1] = b[1], b[0]; return b }), ErrMagic},
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ErrMagic},
		{"kind 0", mutate(func(b []byte) []byte { b[3] = 0; return b }), ErrKind},
		{"kind 4", mutate(func(b []byte) []byte { b[3] = 4; return b }), ErrKind},
		{"kind 255", mutate(func(b []byte) []byte { b[3] = 255; return b }), ErrKind},
		{"version 0", mutate(func(b []byte) []byte { b[2] = 0; return b }), ErrVersionGap},
		{"version 2", mutate(func(b []byte) []byte { b[2] = Version + 1; return b }), ErrVersionGap},
		{"version 255", mutate(func(b []byte) []byte { b[2] = 255; return b }), ErrVersionGap},
		{"length short", mutate(func(b []byte) []byte { return b[:len(b)-1] }), ErrLength},
		{"length long", mutate(func(b []byte) []byte { return append(b, 'x') }), ErrLength},
		{"length huge", mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 0xFFFFFFFF); return b }), ErrLength},
		{"length header only", mutate(func(b []byte) []byte { return b[:HeaderSize] }), ErrLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, body, err := ParseHeader(tt.msg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if body != nil {
				t.Errorf("a refused message returned a body of %d bytes", len(body))
			}
		})
	}
}

func TestParseHeaderVersionGapMessage(t *testing.T) {
	msg := message(Header{Version: 9, Kind: KindRequest, Op: OpHello, ID: 3}, nil)
	h, _, err := ParseHeader(msg)
	if !errors.Is(err, ErrVersionGap) {
		t.Fatalf("err = %v, want ErrVersionGap", err)
	}
	// The message names both versions and what to do, and the header fields
	// decoded so far are returned so that the reply can carry the request's id.
	for _, s := range []string{"version 9", fmt.Sprintf("speaks %d", Version), "same release"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if h.ID != 3 || h.Op != OpHello || h.Kind != KindRequest {
		t.Errorf("header of a version-gap message = %+v", h)
	}
}

func TestOpAndCodeStrings(t *testing.T) {
	for o := Op(1); o < opMax; o++ {
		if !o.Valid() || o.String() == "" || strings.HasPrefix(o.String(), "op(") {
			t.Errorf("op %d: Valid=%v String=%q", uint16(o), o.Valid(), o.String())
		}
	}
	for _, o := range []Op{0, opMax, 1000, 0xFFFF} {
		if o.Valid() {
			t.Errorf("op %d valid", uint16(o))
		}
		if got, want := o.String(), fmt.Sprintf("op(%d)", uint16(o)); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", uint16(o), got, want)
		}
	}
	if OpHello.String() != "hello" || OpModifyQP.String() != "modify_qp" || OpEvent.String() != "event" {
		t.Errorf("op names: %v %v %v", OpHello, OpModifyQP, OpEvent)
	}
	for c := CodeOK; c < codeMax; c++ {
		if !c.Valid() || c.String() == "" || strings.HasPrefix(c.String(), "code(") {
			t.Errorf("code %d: Valid=%v String=%q", uint16(c), c.Valid(), c.String())
		}
	}
	for _, c := range []Code{codeMax, 500, 0xFFFF} {
		if c.Valid() {
			t.Errorf("code %d valid", uint16(c))
		}
	}
	if got := Code(500).String(); got != "code(500)" {
		t.Errorf("Code(500).String() = %q", got)
	}
}

func TestErrors(t *testing.T) {
	e := Errorf(CodeNotFound, "no %s with handle %d", "queue pair", 4)
	e.Op = OpModifyQP
	if got, want := e.Error(), "vrdma modify_qp: no queue pair with handle 4"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if CodeOf(e) != CodeNotFound {
		t.Errorf("CodeOf = %v", CodeOf(e))
	}
	if CodeOf(fmt.Errorf("wrapped: %w", e)) != CodeNotFound {
		t.Error("CodeOf does not see through wrapping")
	}
	if CodeOf(errors.New("plain")) != CodeInternal {
		t.Error("CodeOf(plain error) is not CodeInternal")
	}
}

func TestDecode(t *testing.T) {
	var req HelloReq
	if err := Decode([]byte(`{"device":"vrdma0","client":"t","future_field":[1,2]}`), &req); err != nil {
		t.Fatalf("unknown fields must be ignored: %v", err)
	}
	if req.Device != "vrdma0" || req.Client != "t" {
		t.Errorf("decoded %+v", req)
	}
	for _, body := range []string{"", "{", `{"device":5}`, "null x", `"str"`} {
		var r HelloReq
		err := Decode([]byte(body), &r)
		if err == nil {
			t.Errorf("Decode(%q) accepted", body)
			continue
		}
		if CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), "malformed command body") {
			t.Errorf("Decode(%q) = %v (code %v)", body, err, CodeOf(err))
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add([]byte{})
	f.Add(message(Header{Version: Version, Kind: KindRequest, Op: OpHello, ID: 1}, []byte(`{"device":"vrdma0"}`)))
	f.Add(message(Header{Version: Version, Kind: KindReply, Op: OpCreateQP, Code: CodeLimit, ID: 9}, nil))
	f.Add(message(Header{Version: 2, Kind: KindRequest, Op: OpHello}, nil))
	f.Add(message(Header{Version: Version, Kind: 7, Op: OpHello}, nil))
	f.Add(AppendHeader(nil, Header{Version: Version, Kind: KindEvent, BodyLen: 100}))
	f.Add([]byte("vR\x01\x01"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		h, body, err := ParseHeader(msg)
		if err != nil {
			if body != nil {
				t.Fatalf("error %v with a body", err)
			}
			for _, e := range []error{ErrShort, ErrMagic, ErrLength, ErrKind, ErrTooLarge, ErrVersionGap} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("unexpected error %v", err)
		}
		if h.Version != Version || h.Kind < KindRequest || h.Kind > KindEvent ||
			int(h.BodyLen) != len(body) || len(msg) > MaxMessage {
			t.Fatalf("accepted %+v with %d-byte body from %d bytes", h, len(body), len(msg))
		}
		again := append(AppendHeader(nil, h), body...)
		if !bytes.Equal(again, msg) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, msg)
		}
	})
}

// FuzzDecodeBodies feeds arbitrary bytes to Decode into every request body
// type the daemon accepts: it must never panic, and a body it accepts must
// survive an encode/decode round trip.
func FuzzDecodeBodies(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"instance":"","device":"vrdma0","client":"test"}`,
		`{"pd":1,"addr":140737488355328,"length":4096,"access":15}`,
		`{"cqe":65536}`, `{"cqe":-1}`,
		`{"pd":1,"type":2,"send_cq":2,"recv_cq":2,"srq":0,"sq_sig_all":true,"caps":{"max_send_wr":16,"max_recv_wr":16,"max_send_sge":1,"max_recv_sge":1,"max_inline_data":64}}`,
		`{"handle":3,"mask":1,"attr":{"State":1,"PKeyIndex":0,"PortNum":1,"AccessFlags":15}}`,
		`{"handle":3,"mask":4294967295,"attr":{"AV":{"DGID":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"SGIDIndex":0}}}`,
		`{"pd":1,"max_wr":16,"max_sge":2}`,
		`{"pd":1,"av":{"DGID":[254,128,0,0,0,0,0,0,0,0,0,0,0,0,0,1],"SGIDIndex":255}}`,
		`{"name":"vm1","adapters":10,"async":true}`,
		`{"handle":4294967296}`, `{"port":1}`, `{"port":1e400}`,
		`{"attr":{"DGID":"AAAA"}}`, `{"handle":1,"handle":2}`, "{\"device\":\"\xff\xfe\"}",
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	} {
		f.Add([]byte(s))
	}
	targets := []func() any{
		func() any { return new(HelloReq) },
		func() any { return new(RegMRReq) },
		func() any { return new(AllocMWReq) },
		func() any { return new(CreateCQReq) },
		func() any { return new(CreateQPReq) },
		func() any { return new(ModifyQPReq) },
		func() any { return new(CreateSRQReq) },
		func() any { return new(CreateAHReq) },
		func() any { return new(InstanceSpec) },
		func() any { return new(HandleReq) },
		func() any { return new(QueryPortReq) },
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, newT := range targets {
			v := newT()
			if err := Decode(body, v); err != nil {
				if CodeOf(err) != CodeInvalid {
					t.Fatalf("%T: error %v has code %v, want invalid", v, err, CodeOf(err))
				}
				continue
			}
			// Whatever was accepted can be sent on: it encodes, fits the
			// protocol's types and decodes to the same value.
			enc, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%T: re-encode: %v", v, err)
			}
			w := newT()
			if err := Decode(enc, w); err != nil {
				t.Fatalf("%T: decode of re-encoded %s: %v", v, enc, err)
			}
			if enc2, _ := json.Marshal(w); !bytes.Equal(enc, enc2) {
				t.Fatalf("%T: round trip differs:\n%s\n%s", v, enc, enc2)
			}
		}
	})
}
