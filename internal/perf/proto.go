package perf

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vrdma/vrdma"
)

// The control protocol between a perf client and server: one JSON object
// per line, each line at most maxMsg bytes with its newline. The client
// speaks first:
//
//	C: {"type":"hello","proto":"vrdma-perf","version":1,"conf":{…}}
//	S: {"type":"hello","proto":"vrdma-perf","version":1,"conf":{…}}
//	then for each test:
//	C: {"type":"setup","test":"rc_bw","size":65536,"time_ns":2000000000,"ep":{…}}
//	S: {"type":"ready","ep":{…}}          (its QP connected to the client's)
//	C: {"type":"start"}                    (the client's QP connected too)
//	… the test runs …
//	C: {"type":"end"}                      (the client will send no more)
//	S: {"type":"result","tally":{"ops":…,"bytes":…,"ns":…},"cpu":0.97}
//
// Either side may send {"type":"error","error":"…"} where it would send
// anything else (the server also during the test), and then closes the
// connection; an end that receives an error message closes without
// answering it. An "ep" is an end's address: {"qpn","psn","gid" (32 hex
// digits),"rkey","addr","len"}. A peer's text (an error, a conf) is shown
// and logged with what is not printable escaped.
//
// The server trusts no client: it refuses a setup whose region would take
// more of its memory than it lends (ServerConfig.MaxMemory), gives up on a
// test its client has not ended by its time and ServerConfig.RunSlack,
// or that its own end has not finished within RunSlack of the "end", and
// bounds every other wait by ServerConfig.Timeout or Idle.

const (
	protoName    = "vrdma-perf"
	protoVersion = 1
	maxMsg       = 4096 // bytes in one message, newline included
	maxErrText   = 1024 // bytes of an error message's text
	maxTestTime  = time.Hour
	maxMsgSize   = 1 << 31 // as ParseSize
)

// Message types.
const (
	msgHello  = "hello"
	msgSetup  = "setup"
	msgReady  = "ready"
	msgStart  = "start"
	msgEnd    = "end"
	msgResult = "result"
	msgError  = "error"
)

// message is any control message; which fields it has depends on Type.
type message struct {
	Type    string  `json:"type"`
	Proto   string  `json:"proto,omitempty"`   // hello
	Version int     `json:"version,omitempty"` // hello
	Conf    *Conf   `json:"conf,omitempty"`    // hello
	Test    string  `json:"test,omitempty"`    // setup
	Size    int     `json:"size,omitempty"`    // setup
	TimeNS  int64   `json:"time_ns,omitempty"` // setup
	EP      *wireEP `json:"ep,omitempty"`      // setup, ready
	Tally   *tally  `json:"tally,omitempty"`   // result
	CPU     float64 `json:"cpu,omitempty"`     // result
	Error   string  `json:"error,omitempty"`   // error
}

// wireEP is a peer on the wire.
type wireEP struct {
	QPN  uint32 `json:"qpn"`
	PSN  uint32 `json:"psn"`
	GID  string `json:"gid"`
	RKey uint32 `json:"rkey"`
	Addr uint64 `json:"addr"`
	Len  int    `json:"len"`
}

func toWire(p peer) *wireEP {
	return &wireEP{QPN: p.ep.QPN, PSN: p.ep.PSN, GID: hex.EncodeToString(p.ep.GID[:]), RKey: p.rkey, Addr: p.addr, Len: p.len}
}

// peer converts a checked wireEP (see check).
func (w *wireEP) peer() peer {
	p := peer{ep: vrdma.Endpoint{QPN: w.QPN, PSN: w.PSN}, rkey: w.RKey, addr: w.Addr, len: w.Len}
	_, _ = hex.Decode(p.ep.GID[:], []byte(w.GID)) // check has seen 32 hex digits
	return p
}

func (w *wireEP) check() error {
	if w == nil {
		return errors.New(`no "ep"`)
	}
	if w.QPN >= 1<<24 || w.PSN >= 1<<24 {
		return fmt.Errorf("QPN 0x%x or PSN 0x%x is wider than 24 bits", w.QPN, w.PSN)
	}
	if b, err := hex.DecodeString(w.GID); err != nil || len(b) != len(vrdma.GID{}) {
		return fmt.Errorf("GID %.40q is not 32 hex digits", w.GID)
	}
	if w.Len < 0 {
		return fmt.Errorf("region length %d", w.Len)
	}
	return nil
}

// errorMsg makes an error message, its text clipped to maxErrText.
func errorMsg(err error) *message {
	return &message{Type: msgError, Error: clip(err.Error(), maxErrText)}
}

// printable returns a peer's text with every rune that is not printable
// (control characters, invalid UTF-8) written as its Go escape, so that
// what a peer says cannot start lines of its own or send terminal escapes
// where it is logged or shown. Text that is printable comes back as it is.
func printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, notPrintable) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case notPrintable(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

// appendMessage appends m and its newline to b.
func appendMessage(b []byte, m *message) ([]byte, error) {
	j, err := json.Marshal(m)
	if err != nil {
		return b, fmt.Errorf("encoding a %s message: %w", m.Type, err)
	}
	if len(j)+1 > maxMsg {
		return b, fmt.Errorf("a %s message of %d bytes is over the protocol's %d", m.Type, len(j)+1, maxMsg)
	}
	b = append(b, j...)
	return append(b, '\n'), nil
}

// parseMessage parses one line (without its newline) and checks that it
// has what its type needs. It does not check the hello's version, which
// the caller compares with its own to say what to do about a mismatch.
func parseMessage(line []byte) (message, error) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("%.80q is not a vrdma perf message (a JSON object per line)", line)
	}
	switch m.Type {
	case msgHello:
		if m.Proto != protoName || m.Version < 1 {
			return m, fmt.Errorf("%.80q is not a vrdma perf hello", line)
		}
		if c := m.Conf; c != nil {
			c.Node, c.CPU, c.OS, c.Version = printable(c.Node), printable(c.CPU), printable(c.OS), printable(c.Version)
		}
	case msgSetup:
		t, ok := tests[m.Test]
		if !ok {
			return m, fmt.Errorf("setup for unknown test %.40q", m.Test)
		}
		if m.Size < 1 || m.Size > maxMsgSize {
			return m, fmt.Errorf("setup for message size %d: want 1 byte to 2 GiB", m.Size)
		}
		if n := t.size(m.Size); n != m.Size {
			return m, fmt.Errorf("setup for %s with messages of %d bytes, where its messages are of %d", m.Test, m.Size, n)
		}
		if m.TimeNS <= 0 || m.TimeNS > int64(maxTestTime) {
			return m, fmt.Errorf("setup for %v: want more than 0 and at most %v", time.Duration(m.TimeNS), maxTestTime)
		}
		if err := m.EP.check(); err != nil {
			return m, fmt.Errorf("setup: %w", err)
		}
	case msgReady:
		if err := m.EP.check(); err != nil {
			return m, fmt.Errorf("ready: %w", err)
		}
	case msgStart, msgEnd:
	case msgResult:
		if m.Tally == nil || m.Tally.Time < 0 || m.CPU < 0 || math.IsInf(m.CPU, 0) {
			return m, fmt.Errorf("result %.80q: want a tally and a CPU load of 0 or more", line)
		}
	case msgError:
		if m.Error == "" {
			return m, errors.New("an error message without its text")
		}
		m.Error = printable(m.Error)
	default:
		return m, fmt.Errorf("message of unknown type %.20q", m.Type)
	}
	return m, nil
}
