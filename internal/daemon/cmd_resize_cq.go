package daemon

import (
	"errors"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// cmdResizeCQ replaces a CQ's ring by one of the size asked for
// (ibv_resize_cq; docs/design/cq-resize.md). The new ring is charged to
// the tenant before it is made and the old one given back once replaced,
// so a tenant at its limit cannot grow a CQ past it; a size out of range,
// or below the completions the CQ holds, is refused.
func cmdResizeCQ(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.ResizeCQReq](body)
	if err != nil {
		return nil, nil, err
	}
	cq, err := lookup(s.cqs, req.Handle, "completion queue")
	if err != nil {
		return nil, nil, err
	}
	if req.CQE < 1 || req.CQE > engine.MaxCQE {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "cqe %d: a CQ holds 1 to %d completions", req.CQE, engine.MaxCQE)
	}
	ring := cq.BytesFor(req.CQE)
	if err := s.take(Ring, ring); err != nil {
		return nil, nil, err
	}
	old, fd, err := cq.Resize(req.CQE)
	if err != nil {
		s.give(Ring, ring)
		var below *engine.CQBelowPendingError
		switch {
		case errors.As(err, &below):
			return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", below)
		case errors.Is(err, abi.ErrCorruptRing):
			return nil, nil, proto.Errorf(proto.CodeInvalid, "completion queue %d: %v: the library wrote its consumer index wrong", req.Handle, err)
		}
		return nil, nil, s.d.creationError("completion queue's new ring", err)
	}
	s.give(Ring, old)
	r := cq.Ring()
	return proto.ResizeCQResp{CQE: r.Entries, Size: cq.Size(), Entries: r.Entries}, []int{fd}, nil
}
