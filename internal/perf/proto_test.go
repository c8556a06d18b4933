package perf

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
)

func TestMessagesRoundTrip(t *testing.T) {
	p := peer{ep: vrdma.Endpoint{QPN: 0x11, PSN: 0xabcdef, GID: vrdma.GID{0xfe, 0x80, 15: 1}}, rkey: 0x1234, addr: 0x7f0000001000, len: 8320}
	conf := LocalConf()
	tests := []message{
		{Type: msgHello, Proto: protoName, Version: protoVersion, Conf: &conf},
		{Type: msgSetup, Test: "rc_bw", Size: 65536, TimeNS: int64(2 * time.Second), EP: toWire(p)},
		{Type: msgReady, EP: toWire(p)},
		{Type: msgStart},
		{Type: msgEnd},
		{Type: msgResult, Tally: &tally{Ops: 42, Bytes: 42 << 16, Time: 2 * time.Second}, CPU: 1.5},
		*errorMsg(errorString(strings.Repeat("é", maxErrText))),
	}
	for _, m := range tests {
		b, err := appendMessage(nil, &m)
		if err != nil {
			t.Fatalf("%s: %v", m.Type, err)
		}
		if len(b) > maxMsg || b[len(b)-1] != '\n' || strings.Count(string(b), "\n") != 1 {
			t.Fatalf("%s: %d bytes, not one line of at most %d: %q", m.Type, len(b), maxMsg, b)
		}
		got, err := parseMessage(b[:len(b)-1])
		if err != nil {
			t.Fatalf("%s: %v", m.Type, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: got back %+v, want %+v", m.Type, got, m)
		}
		if m.EP != nil && got.EP.peer() != p {
			t.Errorf("%s: peer %+v, want %+v", m.Type, got.EP.peer(), p)
		}
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestParseMessageSaysWhatIsWrong(t *testing.T) {
	ep := `"ep":{"qpn":17,"psn":1,"gid":"fe800000000000000000000000000001","rkey":1,"addr":0,"len":0}`
	tests := []struct {
		line string
		want string
	}{
		{``, "not a vrdma perf message"},
		{`SSH-2.0-OpenSSH_9.6`, "not a vrdma perf message"},
		{`[1,2]`, "not a vrdma perf message"},
		{`{"type":"hello","proto":"qperf","version":1}`, "not a vrdma perf hello"},
		{`{"type":"hello","proto":"vrdma-perf"}`, "not a vrdma perf hello"},
		{`{"type":"setup","test":"conf","size":1,"time_ns":1,` + ep + `}`, `unknown test "conf"`},
		{`{"type":"setup","test":"rc_bw","size":-1,"time_ns":1,` + ep + `}`, "message size -1"},
		{`{"type":"setup","test":"rc_bw","size":4294967296,"time_ns":1,` + ep + `}`, "message size"},
		{`{"type":"setup","test":"rc_bw","size":1,"time_ns":0,` + ep + `}`, "want more than 0"},
		{`{"type":"setup","test":"ud_bw","size":1048576,"time_ns":1,` + ep + `}`, "where its messages are of 4096"},
		{`{"type":"setup","test":"rc_fetch_add_mr","size":65536,"time_ns":1,` + ep + `}`, "where its messages are of 8"},
		{`{"type":"setup","test":"rc_bw","size":1,"time_ns":1}`, `no "ep"`},
		{`{"type":"ready","ep":{"qpn":16777216,"gid":"fe800000000000000000000000000001"}}`, "wider than 24 bits"},
		{`{"type":"ready","ep":{"qpn":1,"gid":"fe80"}}`, "32 hex digits"},
		{`{"type":"ready","ep":{"qpn":1,"gid":"fe800000000000000000000000000001","len":-5}}`, "region length -5"},
		{`{"type":"ready","ep":{"qpn":"1"}}`, "not a vrdma perf message"},
		{`{"type":"result","cpu":1}`, "want a tally"},
		{`{"type":"result","tally":{"ops":1,"bytes":1,"ns":-1}}`, "want a tally"},
		{`{"type":"result","tally":{"ops":1,"bytes":1,"ns":1},"cpu":-0.5}`, "CPU load of 0 or more"},
		{`{"type":"error"}`, "without its text"},
		{`{"type":"bye"}`, `unknown type "bye"`},
		{`{"tipe":"hello"}`, `unknown type ""`},
	}
	for _, tt := range tests {
		_, err := parseMessage([]byte(tt.line))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseMessage(%s) = %v; want an error with %q", tt.line, err, tt.want)
		}
	}
}

func TestAppendMessageRefusesWhatDoesNotFit(t *testing.T) {
	c := Conf{Node: strings.Repeat("n", maxMsg)}
	if _, err := appendMessage(nil, &message{Type: msgHello, Proto: protoName, Version: protoVersion, Conf: &c}); err == nil || !strings.Contains(err.Error(), "over the protocol's") {
		t.Fatalf("a hello of %d bytes: %v; want it refused", maxMsg, err)
	}
	if got := LocalConf(); len(got.Node) > confFieldMax || len(got.CPU) > confFieldMax || len(got.OS) > confFieldMax {
		t.Errorf("LocalConf has a field over %d bytes: %+v", confFieldMax, got)
	}
}

func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","proto":"vrdma-perf","version":1,"conf":{"node":"a","cpu":"b","os":"c","vrdma":"d"}}`,
		`{"type":"setup","test":"rc_bw","size":65536,"time_ns":2000000000,"ep":{"qpn":17,"psn":1,"gid":"fe800000000000000000000000000001","rkey":1,"addr":0,"len":0}}`,
		`{"type":"ready","ep":{"qpn":17,"psn":1,"gid":"fe800000000000000000000000000001","rkey":1,"addr":0,"len":0}}`,
		`{"type":"start"}`, `{"type":"end"}`, `{"type":"result","tally":{"ops":1,"bytes":2,"ns":3},"cpu":0.5}`,
		`{"type":"error","error":"no"}`, `GET / HTTP/1.0`, `{"type":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := parseMessage(line)
		if err != nil {
			return
		}
		b, err := appendMessage(nil, &m)
		if err != nil {
			return // longer than a message may be
		}
		again, err := parseMessage(b[:len(b)-1])
		if err != nil {
			t.Fatalf("%q parsed, was written as %q, which does not: %v", line, b, err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("%q parsed as %+v, then as %+v", line, m, again)
		}
	})
}

func TestPeerTextComesBackPrintable(t *testing.T) {
	tests := []struct {
		line string
		want string // the error message's text, or the hello's node
	}{
		{`{"type":"error","error":"the server is busy: try again"}`, "the server is busy: try again"},
		{`{"type":"error","error":"déjà vu, 2 µs"}`, "déjà vu, 2 µs"},
		{`{"type":"error","error":"no\nclient 10.0.0.1: forged"}`, `no\nclient 10.0.0.1: forged`},
		{`{"type":"error","error":"\u001b[31mred\u001b[0m\r"}`, `\x1b[31mred\x1b[0m\r`},
		{`{"type":"error","error":"a\u2028b\u0000c"}`, `a\u2028b\x00c`},
		{`{"type":"hello","proto":"vrdma-perf","version":1,"conf":{"node":"host\n\u001b]0;title\u0007"}}`, `host\n\x1b]0;title\a`},
	}
	for _, tt := range tests {
		m, err := parseMessage([]byte(tt.line))
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		got := m.Error
		if m.Conf != nil {
			got = m.Conf.Node
		}
		if got != tt.want {
			t.Errorf("%s: text %q, want %q", tt.line, got, tt.want)
		}
		if printable(got) != got {
			t.Errorf("printable(%q) = %q: not the same text", got, printable(got))
		}
	}
}
