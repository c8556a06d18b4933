package connmgr_test

// The listener seen from a peer that speaks the wire format by hand:
// garbage and truncated or oversized frames close the connection and
// nothing else; unknown connection ids get a REJ (or a DREP) and the
// connection goes on; requests reach a listening session as events, and
// are rejected when they cannot.

import (
	"bytes"
	"net"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/proto"
)

func TestCMWireGarbage(t *testing.T) {
	m, _ := newManager(t, nil)
	good, _ := req(1, 9, [16]byte{}).Append(nil)
	cases := []struct {
		name  string
		bytes []byte
		half  bool // stop writing after the bytes: the stream ends there
	}{
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false},
		{"tls hello", []byte{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00}, false},
		{"zeros", make([]byte, 64), false},
		{"version 2", append([]byte{'v', 'C', 2}, good[3:]...), false},
		{"unknown type", append([]byte{'v', 'C', 1, 9}, good[4:]...), false},
		{"oversized length", []byte{'v', 'C', 1, 1, 0xFF, 0xFF}, false},
		{"length 513", []byte{'v', 'C', 1, 3, 0x02, 0x01}, false},
		{"malformed REQ (UD)", func() []byte { b := append([]byte(nil), good...); b[cm.HeaderSize+12] = 4; return b }(), false},
		{"REQ with a trailing byte", func() []byte {
			b := append(append([]byte(nil), good...), 0)
			b[5]++
			return b
		}(), false},
		{"truncated header", good[:4], true},
		{"truncated body", good[:30], true},
		{"a good frame then garbage", append(append([]byte(nil), good...), "garbage"...), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := dialCM(t, m)
			p.Write(c.bytes)
			if c.half {
				_ = p.Conn.(*net.TCPConn).CloseWrite()
			}
			if !p.Closed() {
				t.Fatal("the manager kept a connection that sent garbage")
			}
		})
	}
	noListener(t, m)
}

// Messages for connections the manager does not have: a REP or an RTU
// gets a REJ (so that the sender's side ends too), a DREQ gets its DREP, a
// DREP or a REJ nothing; the connection stays open.
func TestCMWireUnknownIDs(t *testing.T) {
	m, _ := newManager(t, nil)
	p := dialCM(t, m)
	p.Send(&cm.REP{LocalID: 5, RemoteID: 0x1234, MTU: 3, QPN: 1, PSN: 2})
	p.ExpectREJ(5, cm.RejectInvalidCommID, "no request 0x1234")
	p.Send(&cm.RTU{LocalID: 6, RemoteID: 0x1234})
	p.ExpectREJ(6, cm.RejectInvalidCommID, "0x1234")
	p.Send(&cm.DREQ{LocalID: 7, RemoteID: 0x1234})
	if m, ok := p.Recv().(*cm.DREP); !ok || m.RemoteID != 7 {
		t.Fatalf("got %+v, want a DREP of 7", m)
	}
	p.Send(&cm.DREP{LocalID: 8, RemoteID: 0x1234})
	p.Send(&cm.REJ{LocalID: 9, RemoteID: 0x1234, Reason: cm.RejectConsumer})
	p.Send(&cm.REJ{LocalID: 9, Reason: cm.RejectTimeout})
	// Nothing answered those two: the next message is the answer to this.
	p.Send(req(10, 9, [16]byte{0xfe, 0x80, 15: 1}))
	p.ExpectREJ(10, cm.RejectInvalidServiceID, "no listener on port 9")
}

// A request reaches the listening session with the requester's attributes;
// requests the manager cannot serve are rejected with the reason.
func TestCMWireRequests(t *testing.T) {
	m, h := newManager(t, nil)
	s := listenSession(t, m, h, 7000, 1)
	p := dialCM(t, m)
	r := req(21, 7000, h.gid())
	r.PrivateData = []byte("hi")
	p.Send(r)
	ev := s.event()
	if ev.Type != proto.CMEventRequest || ev.Listener != 1 || ev.ID < proto.CMDaemonIDBase || ev.QPN != 0x77 || ev.PSN != 0x1234 ||
		ev.MTU != 3 || ev.RdAtomic != 4 || ev.QPType != uint8(abi.QPTypeRC) || string(ev.PrivateData) != "hi" ||
		!bytes.Equal(ev.GID, r.SrcGID[:]) || ev.RemotePort != 40000 || ev.LocalPort != 7000 {
		t.Fatalf("request event %+v", ev)
	}
	p.Send(r) // the same request again: already there, nothing happens

	p.Send(req(22, 7000, [16]byte{10: 0xff, 11: 0xff, 198, 51, 100, 7}))
	p.ExpectREJ(22, cm.RejectInvalidGID, "198.51.100.7 is not the address of an adapter on host cm-test")
	p.Send(req(23, 7000, h.gid()))
	p.ExpectREJ(23, cm.RejectNoResources, "backlog")
	uc := req(24, 7001, h.gid())
	p.Send(uc)
	p.ExpectREJ(24, cm.RejectInvalidServiceID, "no listener on port 7001")

	// The requester gives up: the session hears of it.
	p.Send(&cm.REJ{LocalID: 21, Reason: cm.RejectTimeout, Text: "gave up"})
	if ev := s.event(); ev.Type != proto.CMEventRejected || ev.Reason != uint16(cm.RejectTimeout) || ev.Text != "gave up" {
		t.Fatalf("event %+v, want the request rejected", ev)
	}
	// A request the session holds when it ends is rejected.
	p.Send(req(25, 7000, h.gid()))
	if ev := s.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v", ev)
	}
	m.CloseSession(s)
	p.ExpectREJ(25, cm.RejectInvalidServiceID, "went away")
	noListener(t, m)
}

// A request nobody answers is withdrawn by the manager after the
// requester's timeout (and a grace period): the requester gets a REJ, the
// session an event.
func TestCMWireRequestExpires(t *testing.T) {
	m, h := newManager(t, nil)
	s := listenSession(t, m, h, 7000, 0)
	p := dialCM(t, m)
	r := req(31, 7000, h.gid())
	r.TimeoutMillis = 1
	p.Send(r)
	if ev := s.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v", ev)
	}
	p.ExpectREJ(31, cm.RejectTimeout, "did not answer")
	if ev := s.event(); ev.Type != proto.CMEventTimeout {
		t.Fatalf("event %+v, want a timeout", ev)
	}
}
