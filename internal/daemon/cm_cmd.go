package daemon

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// The connection manager's commands. They run with the session's lock held
// (they name its QPs) and take the manager's inside it; none waits for a
// peer: what they start ends with an event.

func cmdCMListen(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMListenReq](body)
	if err != nil {
		return nil, nil, err
	}
	port, err := s.d.cm.listen(s, req)
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
	return done, nil, s.d.cm.cancelListen(s, req.ID)
}

func cmdCMConnect(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMConnectReq](body)
	if err != nil {
		return nil, nil, err
	}
	resp, err := s.d.cm.connect(s, req)
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
	return done, nil, s.d.cm.accept(s, req)
}

func cmdCMReject(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMRejectReq](body)
	if err != nil {
		return nil, nil, err
	}
	return done, nil, s.d.cm.reject(s, req)
}

func cmdCMDisconnect(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CMDisconnectReq](body)
	if err != nil {
		return nil, nil, err
	}
	return done, nil, s.d.cm.disconnect(s, req)
}

// checkClientID checks an id the library picked for a new listener or
// connection.
func checkClientID(id uint32, used bool) error {
	if id == 0 || id >= proto.CMDaemonIDBase {
		return proto.Errorf(proto.CodeInvalid, "id %d: the library's ids are 1 to %d", id, proto.CMDaemonIDBase-1)
	}
	if used {
		return proto.Errorf(proto.CodeBusy, "id %d is in use on this connection", id)
	}
	return nil
}

func checkPrivateData(t cm.Type, data []byte) error {
	if max := cm.MaxPrivateData(t); len(data) > max {
		return proto.Errorf(proto.CodeInvalid, "private data of %d bytes: a %v carries at most %d", len(data), t, max)
	}
	return nil
}

func checkPSN(psn uint32) error {
	if psn > cm.Max24 {
		return proto.Errorf(proto.CodeInvalid, "PSN %#x is above 24 bits", psn)
	}
	return nil
}

// cmQP finds the session's QP a connection is to use; s.mu is held.
func cmQP(s *session, h uint32) (*engine.QP, error) {
	q, err := lookup(s.qps, h, "queue pair")
	if err != nil {
		return nil, err
	}
	if t := q.Type(); t != abi.QPTypeRC && t != abi.QPTypeUC {
		return nil, proto.Errorf(proto.CodeInvalid, "QP %d is %v: only RC and UC QPs are connected; UD needs no connection, address each datagram with an address handle", h, t)
	}
	return q, nil
}
