package daemon

import (
	"errors"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// cmdModifySRQ is ibv_modify_srq as rxe has it: IBV_SRQ_MAX_WR resizes
// the SRQ's ring (charged to the tenant before it is made, the old one
// given back once replaced), IBV_SRQ_LIMIT arms its limit event. rxe's
// checks are kept: a size out of range, below the posted requests or below
// the armed limit, and a limit above the SRQ's size are refused.
func cmdModifySRQ(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.ModifySRQReq](body)
	if err != nil {
		return nil, nil, err
	}
	srq, err := lookup(s.srqs, req.Handle, "shared receive queue")
	if err != nil {
		return nil, nil, err
	}
	if req.Mask&^(proto.SRQMaxWR|proto.SRQLimit) != 0 {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "SRQ attribute mask %#x: only IBV_SRQ_MAX_WR (1) and IBV_SRQ_LIMIT (2) can be changed", req.Mask)
	}
	if req.Mask&proto.SRQMaxWR != 0 && (req.MaxWR < 1 || req.MaxWR > engine.MaxQPWR) {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "SRQ max_wr %d: must be 1..%d", req.MaxWR, engine.MaxQPWR)
	}
	if req.Mask&proto.SRQLimit != 0 && (req.Limit < 0 || req.Limit > engine.MaxQPWR) {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "srq_limit %d: must be 0..%d", req.Limit, engine.MaxQPWR)
	}
	var fds []int
	switch {
	case req.Mask&proto.SRQMaxWR != 0:
		limit := -1 // keep the armed one
		if req.Mask&proto.SRQLimit != 0 {
			limit = req.Limit
		}
		ring := srq.SRQBytesFor(req.MaxWR)
		if err := s.take(Ring, ring); err != nil {
			return nil, nil, err
		}
		old, fd, err := srq.Resize(req.MaxWR, limit)
		if err != nil {
			s.give(Ring, ring)
			return nil, nil, srqError(s, req.Handle, err)
		}
		s.give(Ring, old)
		fds = []int{fd}
	case req.Mask&proto.SRQLimit != 0:
		if err := srq.SetLimit(req.Limit); err != nil {
			return nil, nil, srqError(s, req.Handle, err)
		}
	}
	return srqAttr(srq, fds != nil), fds, nil
}

// cmdQuerySRQ is ibv_query_srq: the SRQ's size and armed limit, which the
// limit event disarms in the daemon.
func cmdQuerySRQ(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.HandleReq](body)
	if err != nil {
		return nil, nil, err
	}
	srq, err := lookup(s.srqs, req.Handle, "shared receive queue")
	if err != nil {
		return nil, nil, err
	}
	return srqAttr(srq, false), nil, nil
}

func srqAttr(srq *engine.RQ, ring bool) proto.ModifySRQResp {
	r := srq.Ring()
	resp := proto.ModifySRQResp{MaxWR: r.Entries, Limit: srq.Limit()}
	if ring {
		resp.Size = srq.Size()
		resp.Ring = proto.RingInfo{Offset: r.Offset, Entries: r.Entries, Stride: r.Stride}
	}
	return resp
}

// srqError turns the engine's refusals into the errors the library maps
// to errno (EINVAL for all of rxe's).
func srqError(s *session, h uint32, err error) error {
	var lim *engine.SRQLimitError
	var below *engine.SRQBelowPendingError
	switch {
	case errors.As(err, &lim), errors.As(err, &below):
		return proto.Errorf(proto.CodeInvalid, "shared receive queue %d: %v", h, err)
	case errors.Is(err, abi.ErrCorruptRing):
		return proto.Errorf(proto.CodeInvalid, "shared receive queue %d: %v: the library wrote its producer index wrong", h, err)
	case errors.Is(err, engine.ErrSRQClosed):
		return proto.Errorf(proto.CodeNotFound, "shared receive queue %d: %v", h, err)
	}
	return s.d.creationError("shared receive queue's new ring", err)
}
