package connmgr

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// Checks of what a session asks for: each error says what to fix.

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

// qpOf finds the session's QP a connection is to use, on the requester's
// side (dialling) or the responder's; the session's lock is held. RC and
// UC QPs connect on either side; an XRC initiator (XRC_SEND) only dials,
// and an XRC target (XRC_RECV) only answers.
func qpOf(s Session, h uint32, dialling bool) (*engine.QP, error) {
	q, err := s.QP(h)
	if err != nil {
		return nil, err
	}
	switch t := q.Type(); {
	case t == abi.QPTypeRC || t == abi.QPTypeUC:
	case t == abi.QPTypeXRCSend && dialling:
	case t == abi.QPTypeXRCRecv && !dialling:
	case t == abi.QPTypeXRCSend:
		return nil, proto.Errorf(proto.CodeInvalid, "QP %d is XRC_SEND, an initiator: it dials; an XRC_RECV QP (a target) answers a request", h)
	case t == abi.QPTypeXRCRecv:
		return nil, proto.Errorf(proto.CodeInvalid, "QP %d is XRC_RECV, a target: it answers a request; an XRC_SEND QP (an initiator) dials", h)
	default:
		return nil, proto.Errorf(proto.CodeInvalid, "QP %d is %v: only RC, UC and XRC QPs are connected; UD needs no connection, address each datagram with an address handle", h, t)
	}
	return q, nil
}
