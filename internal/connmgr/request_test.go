package connmgr_test

import (
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// What a session asks for wrongly fails with the code the command replies
// with and a message that says what to fix.
func TestCMRequestErrors(t *testing.T) {
	m, h := newManager(t, nil)
	gid := h.gid()
	remote := [16]byte{10: 0xff, 11: 0xff, 192, 0, 2, 9}
	// The session's QPs: 1 an RC QP in RESET, 2 a UD QP, 3 an RC QP in INIT.
	const rc, ud, _, errQP = 1, 2, 3, 4 // 3: a QP in INIT, which a connect may name
	connectReq := func(f func(r *proto.CMConnectReq)) proto.CMConnectReq {
		r := proto.CMConnectReq{ID: 5, QP: rc, PSN: 1, Addr: gid[:], Port: 1}
		f(&r)
		return r
	}
	connect := func(f func(r *proto.CMConnectReq)) func(*connmgr.Manager, *session) error {
		return func(m *connmgr.Manager, s *session) error {
			_, err := m.Connect(s, connectReq(f))
			return err
		}
	}
	listen := func(id uint32, port uint16, backlog int) func(*connmgr.Manager, *session) error {
		return func(m *connmgr.Manager, s *session) error {
			_, err := m.Listen(s, proto.CMListenReq{ID: id, Port: port, Backlog: backlog})
			return err
		}
	}
	// Setups: on the session, on another session of instance tenant-b;
	// a connection of the session's that waits for an answer.
	own := func(f func(*connmgr.Manager, *session) error) func(m *connmgr.Manager, s, other *session) error {
		return func(m *connmgr.Manager, s, _ *session) error { return s.do(func() error { return f(m, s) }) }
	}
	others := func(f func(*connmgr.Manager, *session) error) func(m *connmgr.Manager, s, other *session) error {
		return func(m *connmgr.Manager, _, other *session) error {
			return other.do(func() error { return f(m, other) })
		}
	}
	waiting := func(m *connmgr.Manager, s, other *session) error {
		if err := others(listen(1, 9, 0))(m, s, other); err != nil {
			return err
		}
		return own(connect(func(r *proto.CMConnectReq) { r.Port = 9 }))(m, s, other)
	}
	tests := []struct {
		name  string
		setup func(m *connmgr.Manager, s, other *session) error // nil: none
		call  func(*connmgr.Manager, *session) error
		code  proto.Code
		want  string
	}{
		{"listen id 0", nil, listen(0, 1, 0), proto.CodeInvalid, "the library's ids are 1 to"},
		{"listen a daemon's id", nil, listen(proto.CMDaemonIDBase, 1, 0), proto.CodeInvalid, "ids are"},
		{"negative backlog", nil, listen(1, 1, -1), proto.CodeInvalid, "backlog -1"},
		{"backlog too deep", nil, listen(1, 1, 5000), proto.CodeInvalid, "1 to 4096 requests"},
		{"id in use", own(listen(1, 1, 0)), listen(1, 2, 0), proto.CodeBusy, "id 1 is in use"},
		{"port in use", others(listen(1, 1, 0)), listen(2, 1, 0), proto.CodeBusy, "port 1 is in use: instance tenant-b's listener has it"},
		{"cancel an unknown listener", nil, func(m *connmgr.Manager, s *session) error { return m.CancelListen(s, 9) },
			proto.CodeNotFound, "no listener 9"},
		{"REQ private data", nil, connect(func(r *proto.CMConnectReq) { r.PrivateData = make([]byte, 57) }), proto.CodeInvalid, "at most 56"},
		{"PSN", nil, connect(func(r *proto.CMConnectReq) { r.PSN = 1 << 24 }), proto.CodeInvalid, "24 bits"},
		{"short address", nil, connect(func(r *proto.CMConnectReq) { r.Addr = gid[:4] }), proto.CodeInvalid, "a GID has 16"},
		{"address ::", nil, connect(func(r *proto.CMConnectReq) { r.Addr = make([]byte, 16) }), proto.CodeInvalid, "address ::"},
		{"port 0", nil, connect(func(r *proto.CMConnectReq) { r.Port = 0 }), proto.CodeInvalid, "port 0"},
		{"no such QP", nil, connect(func(r *proto.CMConnectReq) { r.QP = 99 }), proto.CodeNotFound, "no queue pair"},
		{"UD QP to another host without MADs", nil, connect(func(r *proto.CMConnectReq) { r.QP, r.Addr = ud, remote[:] }), proto.CodeInvalid,
			"a UD QP's dial to another host is a SIDR_REQ"},
		{"UD QP with 181 bytes", nil, connect(func(r *proto.CMConnectReq) { r.QP, r.PrivateData = ud, make([]byte, 181) }), proto.CodeInvalid,
			"a SIDR_REQ carries at most 180"},
		{"QP in ERR", nil, connect(func(r *proto.CMConnectReq) { r.QP = errQP }), proto.CodeState, "modify it to RESET first"},
		{"connect id 0", nil, connect(func(r *proto.CMConnectReq) { r.ID = 0 }), proto.CodeInvalid, "ids are"},
		{"unreachable", nil, connect(func(r *proto.CMConnectReq) { r.Addr = remote[:] }), proto.CodeNotFound,
			"cannot find the connection manager of 192.0.2.9: this connection manager has no QP1"},
		{"accept an unknown connection", nil, func(m *connmgr.Manager, s *session) error { return m.Accept(s, proto.CMAcceptReq{ID: 77}) },
			proto.CodeNotFound, "no connection 77"},
		{"reject an unknown connection", nil, func(m *connmgr.Manager, s *session) error { return m.Reject(s, proto.CMRejectReq{ID: 77}) },
			proto.CodeNotFound, "no connection 77"},
		{"disconnect an unknown connection", nil, func(m *connmgr.Manager, s *session) error {
			return m.Disconnect(s, proto.CMDisconnectReq{ID: 77})
		}, proto.CodeNotFound, "no connection 77"},
		{"reject text", nil, func(m *connmgr.Manager, s *session) error {
			return m.Reject(s, proto.CMRejectReq{ID: 77, Text: strings.Repeat("x", 200)})
		}, proto.CodeInvalid, "at most 128"},
		{"DREQ private data", nil, func(m *connmgr.Manager, s *session) error {
			return m.Disconnect(s, proto.CMDisconnectReq{ID: 77, PrivateData: make([]byte, 221)})
		}, proto.CodeInvalid, "at most 220"},
		{"disconnect a connection in progress", waiting, func(m *connmgr.Manager, s *session) error {
			return m.Disconnect(s, proto.CMDisconnectReq{ID: 5})
		}, proto.CodeState, "not established: reject it instead"},
		{"confirm before a reply", waiting, func(m *connmgr.Manager, s *session) error {
			return m.Accept(s, proto.CMAcceptReq{ID: 5})
		}, proto.CodeState, "accept answers a request (listener side) or a reply (dialling side)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := newSession(t, h.adapter)
			other.instance = "tenant-b"
			s := newSession(t, h.adapter)
			s.newQP(abi.QPTypeRC)
			s.newQP(abi.QPTypeUD)
			_, q := s.newQP(abi.QPTypeRC)
			if _, err := q.Modify(&qpstate.Attr{State: abi.QPStateInit, PortNum: 1},
				qpstate.MaskState|qpstate.MaskPKeyIndex|qpstate.MaskPort|qpstate.MaskAccessFlags); err != nil {
				t.Fatal(err)
			}
			_, eq := s.newQP(abi.QPTypeRC)
			if _, err := eq.Modify(&qpstate.Attr{State: abi.QPStateErr}, qpstate.MaskState); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				m.CloseSession(s)
				m.CloseSession(other)
			})
			if tt.setup != nil {
				if err := tt.setup(m, s, other); err != nil {
					t.Fatalf("setup: %v", err)
				}
			}
			err := s.do(func() error { return tt.call(m, s) })
			if proto.CodeOf(err) != tt.code || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v (code %v), want code %v and %q", err, proto.CodeOf(err), tt.code, tt.want)
			}
		})
	}
}
