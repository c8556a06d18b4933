package daemon_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/proto"
)

// FuzzCMWire writes arbitrary bytes to the connection manager's TCP port of
// a daemon with a listening session, then ends the stream. The daemon must
// answer or close, never crash or hang, and keep serving new connections.
func FuzzCMWire(f *testing.F) {
	d := cmDaemon(f)
	s := listenSession(f, d, 7000, 0)
	frames := func(ms ...cm.Message) []byte {
		var b []byte
		for _, m := range ms {
			var err error
			if b, err = m.Append(b); err != nil {
				f.Fatal(err)
			}
		}
		return b
	}
	gid := s.gid
	f.Add(frames(req(1, 7000, gid)))
	f.Add(frames(req(1, 7000, gid), &cm.REJ{LocalID: 1, Reason: cm.RejectTimeout}))
	f.Add(frames(req(2, 9, gid), &cm.RTU{LocalID: 2, RemoteID: 3}, &cm.DREQ{LocalID: 2, RemoteID: 3}))
	f.Add(frames(&cm.REP{LocalID: 4, RemoteID: 5, MTU: 3}, &cm.DREP{LocalID: 4, RemoteID: 5}))
	f.Add([]byte{'v', 'C', 1, 1, 0xFF, 0xFF})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := net.Dial("tcp", d.CMAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(b); err != nil {
			return // the daemon closed it already
		}
		_ = c.(*net.TCPConn).CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(cmWait))
		if _, err := io.Copy(io.Discard, c); isTimeout(err) {
			t.Fatalf("the daemon neither answered nor closed: %v", err)
		}
	})
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// FuzzCMCommand sends a connection manager command with an arbitrary body
// on a session that has a QP (handle 3). The daemon answers it and the
// session goes on serving.
func FuzzCMCommand(f *testing.F) {
	d := cmDaemon(f)
	js := func(v any) []byte { return mustJSON(v) }
	gid := []byte{0xfe, 0x80, 15: 1}
	seeds := []struct {
		op   proto.Op
		body []byte
	}{
		{proto.OpCMListen, js(proto.CMListenReq{ID: 1, Port: 7000})},
		{proto.OpCMListen, js(proto.CMListenReq{ID: 1, Port: 0, Backlog: 5000})},
		{proto.OpCMCancelListen, js(proto.CMCancelListenReq{ID: 1})},
		{proto.OpCMConnect, js(proto.CMConnectReq{ID: 1, QP: 3, PSN: 1, Addr: gid, Port: 7000, PrivateData: []byte("x")})},
		{proto.OpCMConnect, js(proto.CMConnectReq{ID: 1, QP: 3, Addr: make([]byte, 16), Port: 1, TimeoutMs: 1})},
		{proto.OpCMAccept, js(proto.CMAcceptReq{ID: proto.CMDaemonIDBase, QP: 3})},
		{proto.OpCMReject, js(proto.CMRejectReq{ID: 1, Reason: 28, Text: "no"})},
		{proto.OpCMDisconnect, js(proto.CMDisconnectReq{ID: 1})},
		{proto.OpCMEvent, js(proto.CMEvent{Type: 1})},
		{proto.OpCMConnect, []byte(`{"addr":"AAAA","port":-1}`)},
		{proto.OpCMListen, []byte(`{`)},
	}
	for _, s := range seeds {
		f.Add(uint16(s.op), s.body)
	}
	f.Fuzz(func(t *testing.T, op uint16, body []byte) {
		if op < uint16(proto.OpCMListen) || op > uint16(proto.OpCMEvent) {
			op = uint16(proto.OpCMListen) + op%7
		}
		c := dial(t, d.SocketPath())
		defer c.Close()
		prepare(c)
		r := c.call(proto.Op(op), body)
		proto.CloseFDs(r.fds)
		c.ok(proto.OpQueryDevice, nil, nil)
	})
}
