package daemon_test

import (
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
)

// The connection manager's listener has its fuzz target in package connmgr
// (FuzzCMWire).

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
