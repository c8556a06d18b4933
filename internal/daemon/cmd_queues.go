package daemon

import (
	"errors"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"golang.org/x/sys/unix"
)

func cmdCreateCQ(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CreateCQReq](body)
	if err != nil {
		return nil, nil, err
	}
	if req.CQE < 1 || req.CQE > engine.MaxCQE {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "cqe %d: a CQ holds 1 to %d completions", req.CQE, engine.MaxCQE)
	}
	ring, newCQ := engine.CQBytes(req.CQE), engine.NewCQ
	if req.Timestamps {
		ring, newCQ = engine.TimestampedCQBytes(req.CQE), engine.NewTimestampedCQ
	}
	if err := s.takeQueue(CQs, ring); err != nil {
		return nil, nil, err
	}
	cq, err := newCQ(req.CQE)
	if err != nil {
		s.giveQueue(CQs, ring)
		return nil, nil, s.d.creationError("completion queue", err)
	}
	h := s.handleID()
	cq.Handle, cq.Events = h, s
	s.cqs[h] = cq
	fds, err := shareFDs(cq.RegionFD, cq.ShareNotify)
	if err != nil {
		cq.Close()
		delete(s.cqs, h)
		s.giveQueue(CQs, ring)
		return nil, nil, err
	}
	r := cq.Ring()
	return proto.CreateCQResp{Handle: h, CQE: r.Entries, Size: cq.Size(), Entries: r.Entries, Stride: r.Stride}, fds, nil
}

func cmdDestroyCQ(s *session, body []byte, _ []int) (any, []int, error) {
	return destroyUnused(s, CQs, s.cqs, body, "completion queue")
}

func cmdCreateSRQ(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CreateSRQReq](body)
	if err != nil {
		return nil, nil, err
	}
	pd, err := lookup(s.pds, req.PD, "protection domain")
	if err != nil {
		return nil, nil, err
	}
	if req.MaxWR < 1 || req.MaxWR > engine.MaxQPWR || req.MaxSGE < 1 || req.MaxSGE > engine.MaxSGE {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "SRQ max_wr %d / max_sge %d: must be 1..%d / 1..%d", req.MaxWR, req.MaxSGE, engine.MaxQPWR, engine.MaxSGE)
	}
	var xh *xrcdHandle
	var xcq *engine.CQ
	if req.XRCD != 0 || req.CQ != 0 {
		if xh, err = lookup(s.xrcds, req.XRCD, "XRC domain"); err != nil {
			return nil, nil, err
		}
		if xcq, err = lookup(s.cqs, req.CQ, "completion queue"); err != nil {
			return nil, nil, err
		}
	}
	ring := pd.SRQBytes(req.MaxWR, req.MaxSGE, xh != nil) // with a device's side
	if err := s.takeQueue(SRQs, ring); err != nil {
		return nil, nil, err
	}
	var srq *engine.RQ
	if xh != nil {
		srq, err = engine.NewXRCSRQ(pd, xh.dom.x, xcq, req.MaxWR, req.MaxSGE)
	} else {
		srq, err = engine.NewSRQ(pd, req.MaxWR, req.MaxSGE)
	}
	if err != nil {
		s.giveQueue(SRQs, ring)
		return nil, nil, s.d.creationError("shared receive queue", err)
	}
	h := s.handleID()
	srq.Handle, srq.Events = h, s
	if xh == nil && s.adapter.Uplink() != nil {
		// A bound adapter's SRQ is the device's; the client rings its
		// doorbell after posting (the ring's notify word says so).
		if err := srq.PutOnDevice(); err != nil {
			srq.Close()
			s.giveQueue(SRQs, ring)
			return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", err)
		}
	}
	if f := srq.Footprint(); f < ring { // a device that gave fewer slots than entries
		s.give(Ring, ring-f)
		ring = f
	}
	s.srqs[h] = srq
	fds, err := shareFDs(srq.RegionFD, nil)
	if err == nil && srq.OnDevice() {
		var bell int
		if bell, err = srq.ShareDoorbell(); err == nil {
			fds = append(fds, bell)
		} else {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
	if err != nil {
		srq.Close()
		delete(s.srqs, h)
		s.giveQueue(SRQs, ring)
		return nil, nil, err
	}
	if xh != nil {
		s.xrcUse(h, xh)
	}
	r := srq.Ring()
	return proto.CreateSRQResp{Handle: h, MaxWR: r.Entries, MaxSGE: req.MaxSGE, Size: srq.Size(),
		Ring: proto.RingInfo{Offset: r.Offset, Entries: r.Entries, Stride: r.Stride}, SRQN: srq.SRQNum()}, fds, nil
}

func cmdDestroySRQ(s *session, body []byte, _ []int) (any, []int, error) {
	resp, fds, err := destroyUnused(s, SRQs, s.srqs, body, "shared receive queue")
	if err == nil {
		if req, derr := decode[proto.HandleReq](body); derr == nil {
			s.xrcDrop(req.Handle)
		}
	}
	return resp, fds, err
}

// destroyUnused destroys the queue a request names, unless QPs still use
// it, and gives back the r and the bytes it held.
func destroyUnused[T interface {
	Busy() bool
	Close()
	Footprint() uint64
}](s *session, r Resource, m map[uint32]T, body []byte, what string) (any, []int, error) {
	req, err := decode[proto.HandleReq](body)
	if err != nil {
		return nil, nil, err
	}
	q, err := lookup(m, req.Handle, what)
	if err != nil {
		return nil, nil, err
	}
	if q.Busy() {
		return nil, nil, proto.Errorf(proto.CodeBusy, "%s %d is still used by queue pairs: destroy them first", what, req.Handle)
	}
	q.Close()
	delete(m, req.Handle)
	s.giveQueue(r, q.Footprint())
	return done, nil, nil
}

func cmdCreateQP(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CreateQPReq](body)
	if err != nil {
		return nil, nil, err
	}
	typ := abi.QPType(req.Type)
	var pd *engine.PD
	var scq, rcq *engine.CQ
	var xh *xrcdHandle
	switch {
	case typ == abi.QPTypeXRCRecv:
		// A target has no PD, CQs or queues: only its domain.
		if xh, err = lookup(s.xrcds, req.XRCD, "XRC domain"); err != nil {
			return nil, nil, err
		}
		req.Caps = proto.QPCaps{}
	default:
		if pd, err = lookup(s.pds, req.PD, "protection domain"); err != nil {
			return nil, nil, err
		}
		if scq, err = lookup(s.cqs, req.SendCQ, "send completion queue"); err != nil {
			return nil, nil, err
		}
		if typ == abi.QPTypeXRCSend && req.RecvCQ == 0 {
			rcq = scq // an initiator never receives
		} else if rcq, err = lookup(s.cqs, req.RecvCQ, "receive completion queue"); err != nil {
			return nil, nil, err
		}
	}
	var srq *engine.RQ
	if req.SRQ != 0 {
		if srq, err = lookup(s.srqs, req.SRQ, "shared receive queue"); err != nil {
			return nil, nil, err
		}
	}
	var ring uint64
	if pd != nil {
		ring, err = pd.QPBytes(req.Caps, typ, srq != nil || typ.IsXRC()) // with a device's side
	} else {
		ring, err = engine.QPBytes(req.Caps, true) // an XRC target
	}
	if err != nil {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	if err := s.takeQueue(QPs, ring); err != nil {
		return nil, nil, err
	}
	h := s.handleID()
	var xrcd *engine.XRCD
	if xh != nil {
		xrcd = xh.dom.x
	}
	q, err := engine.NewQP(engine.QPConfig{
		PD: pd, Type: typ, SendCQ: scq, RecvCQ: rcq, SRQ: srq, XRCD: xrcd, SigAll: req.SigAll,
		Caps: req.Caps, Handle: h, Events: s, AH: s.ah, Scope: s.mcastScope(),
	})
	if err != nil {
		s.giveQueue(QPs, ring)
		if outOfDescriptors(err) {
			return nil, nil, s.d.creationError("queue pair", err)
		}
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	bell, err := q.ShareDoorbell()
	if err != nil {
		q.Destroy()
		s.giveQueue(QPs, ring)
		return nil, nil, s.d.creationError("queue pair's doorbell", err)
	}
	fds, err := shareFDs(q.RegionFD, nil)
	if err != nil {
		unix.Close(bell)
		q.Destroy()
		s.giveQueue(QPs, ring)
		return nil, nil, err
	}
	fds = append(fds, bell)
	s.qps[h] = q
	if xh != nil {
		s.xrcUse(h, xh)
		s.d.xrcds.holdTarget(q)
	}
	sq, rq := q.SQ(), q.RQ()
	return proto.CreateQPResp{
		Handle: h, QPN: q.QPN(), Caps: q.Caps(), Size: q.Size(),
		SQ:        proto.RingInfo{Offset: sq.Offset, Entries: sq.Entries, Stride: sq.Stride},
		RQ:        proto.RingInfo{Offset: rq.Offset, Entries: rq.Entries, Stride: rq.Stride},
		NotifyGen: true,
	}, fds, nil
}

func cmdModifyQP(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.ModifyQPReq](body)
	if err != nil {
		return nil, nil, err
	}
	q, err := lookup(s.qps, req.Handle, "queue pair")
	if err != nil {
		return nil, nil, err
	}
	if qpstate.Mask(req.Mask)&qpstate.MaskAV != 0 {
		// A destination named by LID alone takes its port's GID here, and
		// goes on as if the program had given it.
		if err := s.d.lids.resolveDLID(s.adapter, s.lidRouting(), &req.Attr.AV, proto.CodeAttr); err != nil {
			return nil, nil, err
		}
	}
	if qpstate.Mask(req.Mask)&qpstate.MaskQKey != 0 && req.Attr.QKey&engine.ControlledQKey != 0 &&
		s.adapter.Uplink() != nil && !s.d.access.privileged(s.cred) {
		// The device would take it from the daemon (IBTA 3.5.3: a
		// controlled Q_Key is for privileged consumers, as the kernel's
		// modify_qp says EPERM to others).
		return nil, nil, proto.Errorf(proto.CodePermission, "Q_Key %#x is a controlled Q_Key (its high bit is set): only root or the daemon's user may give a QP one; use a Q_Key below 0x80000000", req.Attr.QKey)
	}
	st, err := q.Modify(&req.Attr, qpstate.Mask(req.Mask))
	if err != nil {
		code := proto.CodeState
		if errors.Is(err, qpstate.ErrInvalidAttr) {
			code = proto.CodeAttr
		}
		return nil, nil, &proto.Error{Code: code, Message: err.Error()}
	}
	path, reason := q.Path()
	return proto.ModifyQPResp{State: uint8(st), Path: path, Reason: reason, Direct: q.DirectCapable()}, nil, nil
}

func cmdQueryQP(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.HandleReq](body)
	if err != nil {
		return nil, nil, err
	}
	q, err := lookup(s.qps, req.Handle, "queue pair")
	if err != nil {
		return nil, nil, err
	}
	path, _ := q.Path()
	return proto.QueryQPResp{Attr: q.Attr(), Caps: q.Caps(), Path: path}, nil, nil
}

func cmdDestroyQP(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.HandleReq](body)
	if err != nil {
		return nil, nil, err
	}
	q, err := lookup(s.qps, req.Handle, "queue pair")
	if err != nil {
		return nil, nil, err
	}
	s.dropQP(req.Handle, q)
	return done, nil, nil
}

// takeQueue charges a queue of kind r (CQs, SRQs, QPs) and its footprint,
// ring bytes (engine.QPBytes), to the session's uid and instance; giveQueue
// gives both back.
func (s *session) takeQueue(r Resource, ring uint64) error {
	if err := s.take(r, 1); err != nil {
		return err
	}
	if err := s.take(Ring, ring); err != nil {
		s.give(r, 1)
		return err
	}
	return nil
}

func (s *session) giveQueue(r Resource, ring uint64) {
	s.give(r, 1)
	s.give(Ring, ring)
}
