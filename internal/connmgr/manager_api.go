package connmgr

import "github.com/vrdma/vrdma/internal/proto"

// The manager's API: the daemon calls these with the session's lock held
// (see each part's method for what it does).

// Listen starts s listening (ports.Listen).
func (m *Manager) Listen(s Session, req proto.CMListenReq) (uint16, error) {
	return m.ports.Listen(s, req)
}

// CancelListen stops s's listener id (ports.CancelListen).
func (m *Manager) CancelListen(s Session, id uint32) error { return m.ports.CancelListen(s, id) }

// CloseSession ends what s held (ports.CloseSession).
func (m *Manager) CloseSession(s Session) { m.ports.CloseSession(s) }

// Connect sends s's request (commands.Connect).
func (m *Manager) Connect(s Session, req proto.CMConnectReq) (proto.CMConnectResp, error) {
	return m.cmds.Connect(s, req)
}

// Accept answers a request or a reply for s (commands.Accept).
func (m *Manager) Accept(s Session, req proto.CMAcceptReq) error { return m.cmds.Accept(s, req) }

// Reject refuses a request or a reply for s (commands.Reject).
func (m *Manager) Reject(s Session, req proto.CMRejectReq) error { return m.cmds.Reject(s, req) }

// Disconnect ends s's connection (commands.Disconnect).
func (m *Manager) Disconnect(s Session, req proto.CMDisconnectReq) error {
	return m.cmds.Disconnect(s, req)
}

// Resolve says how s's adapter reaches an address (commands.Resolve).
func (m *Manager) Resolve(s Session, req proto.CMResolveReq) (proto.CMResolveResp, error) {
	return m.cmds.Resolve(s, req)
}
