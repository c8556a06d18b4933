package daemon

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
)

// The connection manager's commands. They run with the session's lock held
// (they name its QPs) and the manager takes its own inside it; none waits
// for a peer: what they start ends with an event (cm_events.go).

func cmdCMListen(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMListenReq](body)
	if err != nil {
		return nil, nil, err
	}
	if m, err := s.deviceCM(); err != nil || m != nil {
		if err != nil {
			return nil, nil, err
		}
		port, err := m.Listen(s.cm(), req, s.privileged())
		if err != nil {
			return nil, nil, err
		}
		return proto.CMListenResp{Port: port}, nil, nil
	}
	port, err := s.d.cm.Listen(s.cm(), req)
	if err != nil {
		return nil, nil, err
	}
	return proto.CMListenResp{Port: port}, nil, nil
}

func cmdCMCancelListen(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMCancelListenReq](body)
	if err != nil {
		return nil, nil, err
	}
	if m, err := s.deviceCM(); err != nil || m != nil {
		if err != nil {
			return nil, nil, err
		}
		return done, nil, m.CancelListen(s.cm(), req.ID)
	}
	return done, nil, s.d.cm.CancelListen(s.cm(), req.ID)
}

func cmdCMConnect(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMConnectReq](body)
	if err != nil {
		return nil, nil, err
	}
	if m, err := s.deviceCM(); err != nil || m != nil {
		if err != nil {
			return nil, nil, err
		}
		qpn, err := s.dialingQPN(req.QP)
		if err != nil {
			return nil, nil, err
		}
		connect := m.Connect
		if s.qpUD(req.QP) {
			connect = m.ConnectUD // SIDR (cm_device_ud.go)
		}
		resp, err := connect(s.cm(), req, qpn)
		if err != nil {
			return nil, nil, err
		}
		return resp, nil, nil
	}
	resp, err := s.d.cm.Connect(s.cm(), req)
	if err != nil {
		return nil, nil, err
	}
	return resp, nil, nil
}

func cmdCMAccept(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMAcceptReq](body)
	if err != nil {
		return nil, nil, err
	}
	if m, err := s.deviceCM(); err != nil || m != nil {
		if err != nil {
			return nil, nil, err
		}
		return done, nil, m.Accept(s.cm(), req, func(want abi.QPType) (uint32, error) { return s.answeringQPN(req.QP, want) })
	}
	return done, nil, s.d.cm.Accept(s.cm(), req)
}

func cmdCMReject(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMRejectReq](body)
	if err != nil {
		return nil, nil, err
	}
	if m, err := s.deviceCM(); err != nil || m != nil {
		if err != nil {
			return nil, nil, err
		}
		return done, nil, m.Reject(s.cm(), req)
	}
	return done, nil, s.d.cm.Reject(s.cm(), req)
}

func cmdCMDisconnect(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMDisconnectReq](body)
	if err != nil {
		return nil, nil, err
	}
	if m, err := s.deviceCM(); err != nil || m != nil {
		if err != nil {
			return nil, nil, err
		}
		return done, nil, m.Disconnect(s.cm(), req)
	}
	return done, nil, s.d.cm.Disconnect(s.cm(), req)
}

func cmdCMResolve(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMResolveReq](body)
	if err != nil {
		return nil, nil, err
	}
	if m, err := s.deviceCM(); err != nil || m != nil {
		if err != nil {
			return nil, nil, err
		}
		resp, err := m.Resolve(req)
		if err != nil {
			return nil, nil, err
		}
		return resp, nil, nil
	}
	resp, err := s.d.cm.Resolve(s.cm(), req)
	if err != nil {
		return nil, nil, err
	}
	return resp, nil, nil
}
