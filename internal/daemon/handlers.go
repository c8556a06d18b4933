package daemon

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
)

// handle runs one command. It owns fds: each is either consumed or closed.
func (s *session) handle(op proto.Op, body []byte, fds []int) (resp any, out []int, err error) {
	used := false
	defer func() {
		if !used {
			proto.CloseFDs(fds)
		}
	}()
	if op != proto.OpHello && s.instance() == nil {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%v before hello: open the device first", op)
	}
	needDevice := func() error {
		if s.adapter == nil {
			return proto.Errorf(proto.CodeInvalid, "%v needs an opened device: this connection named none in hello", op)
		}
		return nil
	}
	switch op {
	case proto.OpHello:
		var req proto.HelloReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		return s.hello(req)
	case proto.OpCreateInstance:
		var req proto.InstanceSpec
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		inst, err := s.d.createInstance(req, true)
		if err != nil {
			return nil, nil, err
		}
		info := proto.InstanceInfo{Name: inst.Name}
		for _, a := range inst.Adapters {
			info.Adapters = append(info.Adapters, adapterInfo(a))
		}
		return info, nil, nil
	case proto.OpDeleteInstance:
		var req proto.InstanceSpec
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		return struct{}{}, nil, s.d.deleteInstance(req.Name)
	case proto.OpListInstances:
		return proto.ListInstancesResp{Instances: s.d.listInstances()}, nil, nil
	case proto.OpStats:
		return s.d.Stats(), nil, nil
	}
	if err := needDevice(); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch op {
	case proto.OpQueryDevice:
		return deviceAttr(s.adapter), nil, nil
	case proto.OpQueryPort:
		var req proto.QueryPortReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		if req.Port != 1 {
			return nil, nil, proto.Errorf(proto.CodeInvalid, "port %d does not exist: vrdma adapters have one port, number 1", req.Port)
		}
		return portAttr(s.adapter), nil, nil
	case proto.OpAllocPD:
		h := s.handleID()
		s.pds[h] = s.adapter.NewPD()
		return proto.HandleResp{Handle: h}, nil, nil
	case proto.OpDeallocPD:
		var req proto.HandleReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		return s.deallocPD(req.Handle)
	case proto.OpRegMR:
		var req proto.RegMRReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		used = true
		return s.regMR(req, fds)
	case proto.OpDeregMR:
		var req proto.HandleReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		mr, ok := s.mrs[req.Handle]
		if !ok {
			return nil, nil, notFound("memory region", req.Handle)
		}
		mr.Deregister()
		delete(s.mrs, req.Handle)
		return struct{}{}, nil, nil
	case proto.OpCreateCQ:
		var req proto.CreateCQReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		if req.CQE < 1 || req.CQE > engine.MaxCQE {
			return nil, nil, proto.Errorf(proto.CodeInvalid, "cqe %d: a CQ holds 1 to %d completions", req.CQE, engine.MaxCQE)
		}
		cq, err := engine.NewCQ(req.CQE)
		if err != nil {
			return nil, nil, err
		}
		h := s.handleID()
		cq.Handle, cq.Events = h, s
		s.cqs[h] = cq
		r := cq.Ring()
		return proto.CreateCQResp{Handle: h, CQE: r.Entries, Size: cq.Size(), Entries: r.Entries}, []int{cq.RegionFD(), cq.NotifyFD()}, nil
	case proto.OpDestroyCQ:
		var req proto.HandleReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		cq, ok := s.cqs[req.Handle]
		if !ok {
			return nil, nil, notFound("completion queue", req.Handle)
		}
		if cq.Busy() {
			return nil, nil, proto.Errorf(proto.CodeBusy, "completion queue %d is still used by queue pairs: destroy them first", req.Handle)
		}
		cq.Close()
		delete(s.cqs, req.Handle)
		return struct{}{}, nil, nil
	case proto.OpCreateSRQ:
		var req proto.CreateSRQReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		pd, ok := s.pds[req.PD]
		if !ok {
			return nil, nil, notFound("protection domain", req.PD)
		}
		if req.MaxWR < 1 || req.MaxWR > engine.MaxQPWR || req.MaxSGE < 1 || req.MaxSGE > engine.MaxSGE {
			return nil, nil, proto.Errorf(proto.CodeInvalid, "SRQ max_wr %d / max_sge %d: must be 1..%d / 1..%d", req.MaxWR, req.MaxSGE, engine.MaxQPWR, engine.MaxSGE)
		}
		srq, err := engine.NewSRQ(pd, req.MaxWR, req.MaxSGE)
		if err != nil {
			return nil, nil, err
		}
		h := s.handleID()
		srq.Handle, srq.Events = h, s
		s.srqs[h] = srq
		r := srq.Ring()
		return proto.CreateSRQResp{Handle: h, MaxWR: r.Entries, MaxSGE: req.MaxSGE, Size: srq.Size(),
			Ring: proto.RingInfo{Offset: r.Offset, Entries: r.Entries, Stride: r.Stride}}, []int{srq.RegionFD()}, nil
	case proto.OpDestroySRQ:
		var req proto.HandleReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		srq, ok := s.srqs[req.Handle]
		if !ok {
			return nil, nil, notFound("shared receive queue", req.Handle)
		}
		if srq.Busy() {
			return nil, nil, proto.Errorf(proto.CodeBusy, "shared receive queue %d is still used by queue pairs: destroy them first", req.Handle)
		}
		srq.Close()
		delete(s.srqs, req.Handle)
		return struct{}{}, nil, nil
	case proto.OpCreateQP:
		var req proto.CreateQPReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		return s.createQP(req)
	case proto.OpModifyQP:
		var req proto.ModifyQPReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		q, ok := s.qps[req.Handle]
		if !ok {
			return nil, nil, notFound("queue pair", req.Handle)
		}
		st, err := q.Modify(&req.Attr, qpstate.Mask(req.Mask))
		if err != nil {
			return nil, nil, &proto.Error{Code: proto.CodeState, Message: err.Error()}
		}
		path, reason := q.Path()
		return proto.ModifyQPResp{State: uint8(st), Path: path, Reason: reason, Direct: q.DirectCapable()}, nil, nil
	case proto.OpMapMR:
		var req proto.MapMRReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		q, ok := s.qps[req.QP]
		if !ok {
			return nil, nil, notFound("queue pair", req.QP)
		}
		return mapMR(q, req.RKey)
	case proto.OpQueryQP:
		var req proto.HandleReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		q, ok := s.qps[req.Handle]
		if !ok {
			return nil, nil, notFound("queue pair", req.Handle)
		}
		path, _ := q.Path()
		return proto.QueryQPResp{Attr: q.Attr(), Caps: q.Caps(), Path: path}, nil, nil
	case proto.OpDestroyQP:
		var req proto.HandleReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		q, ok := s.qps[req.Handle]
		if !ok {
			return nil, nil, notFound("queue pair", req.Handle)
		}
		q.Destroy()
		delete(s.qps, req.Handle)
		return struct{}{}, nil, nil
	case proto.OpCreateAH:
		var req proto.CreateAHReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		pd, ok := s.pds[req.PD]
		if !ok {
			return nil, nil, notFound("protection domain", req.PD)
		}
		if int(req.AV.SGIDIndex) >= len(s.adapter.GIDs) {
			return nil, nil, proto.Errorf(proto.CodeInvalid, "sgid_index %d is outside the GID table of %d entries", req.AV.SGIDIndex, len(s.adapter.GIDs))
		}
		h := s.handleID()
		s.ahMu.Lock()
		s.ahs[h] = req.AV
		s.ahPD[h] = pd
		s.ahMu.Unlock()
		return proto.HandleResp{Handle: h}, nil, nil
	case proto.OpDestroyAH:
		var req proto.HandleReq
		if err := proto.Decode(body, &req); err != nil {
			return nil, nil, err
		}
		s.ahMu.Lock()
		defer s.ahMu.Unlock()
		if _, ok := s.ahs[req.Handle]; !ok {
			return nil, nil, notFound("address handle", req.Handle)
		}
		delete(s.ahs, req.Handle)
		delete(s.ahPD, req.Handle)
		return struct{}{}, nil, nil
	}
	return nil, nil, proto.Errorf(proto.CodeInvalid, "unknown command %v: the library is newer than this daemon, upgrade the daemon", op)
}

// mapMR hands a direct-path initiator the peer's region with rkey: only for
// an RC QP in RTS connected to a live local QP of a trusting adapter, and
// only a region of that QP's protection domain.
func mapMR(q *engine.QP, rkey uint32) (any, []int, error) {
	if !q.Direct() {
		return nil, nil, proto.Errorf(proto.CodePermission, "QP 0x%x has no direct path: it must be an RC QP in RTS connected to a QP of a trusted adapter on this host", q.QPN())
	}
	p := q.Peer()
	if p == nil {
		return nil, nil, proto.Errorf(proto.CodeState, "QP 0x%x lost its peer", q.QPN())
	}
	mr := p.LookupMR(rkey)
	if mr == nil {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "no region with rkey 0x%x in the peer's protection domain", rkey)
	}
	fd, addr, length, access, err := mr.Share()
	if err != nil {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "%v", err)
	}
	return proto.MapMRResp{Addr: addr, Length: length, Access: uint32(access), PeerAccess: uint32(p.PeerAccess())}, []int{fd}, nil
}

func notFound(what string, h uint32) error {
	return proto.Errorf(proto.CodeNotFound, "no %s with handle %d on this device", what, h)
}

func (s *session) hello(req proto.HelloReq) (any, []int, error) {
	if s.instance() != nil {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "hello sent twice on one connection")
	}
	inst := s.d.instance(req.Instance)
	if inst == nil {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "no instance %q on this host: create it with `vrdma vm create %s`, or unset VRDMA_INSTANCE to use the default", req.Instance, req.Instance)
	}
	resp := proto.HelloResp{Version: proto.Version, Instance: inst.Name, Host: s.d.cfg.HostName}
	for _, a := range inst.Adapters {
		resp.Adapters = append(resp.Adapters, adapterInfo(a))
	}
	if req.Device != "" {
		for _, a := range inst.Adapters {
			if a.Name == req.Device {
				s.adapter = a
			}
		}
		if s.adapter == nil {
			return nil, nil, proto.Errorf(proto.CodeNotFound, "no device %q in instance %q: `vrdma devices` lists them", req.Device, inst.Name)
		}
		info := adapterInfo(s.adapter)
		resp.Device = &info
		resp.Attr = deviceAttr(s.adapter)
	}
	s.inst.Store(inst)
	return resp, nil, nil
}

func (s *session) deallocPD(h uint32) (any, []int, error) {
	pd, ok := s.pds[h]
	if !ok {
		return nil, nil, notFound("protection domain", h)
	}
	for _, m := range s.mrs {
		if m.PD() == pd {
			return nil, nil, proto.Errorf(proto.CodeBusy, "protection domain %d still has memory regions: deregister them first", h)
		}
	}
	for _, q := range s.qps {
		if q.PD() == pd {
			return nil, nil, proto.Errorf(proto.CodeBusy, "protection domain %d still has queue pairs: destroy them first", h)
		}
	}
	s.ahMu.Lock()
	defer s.ahMu.Unlock()
	for ah, p := range s.ahPD {
		if p == pd {
			return nil, nil, proto.Errorf(proto.CodeBusy, "protection domain %d still has address handle %d: destroy it first", h, ah)
		}
	}
	delete(s.pds, h)
	return struct{}{}, nil, nil
}

func (s *session) regMR(req proto.RegMRReq, fds []int) (any, []int, error) {
	if len(fds) != 1 {
		proto.CloseFDs(fds)
		return nil, nil, proto.Errorf(proto.CodeInvalid, "reg_mr carries exactly one memfd, got %d descriptors", len(fds))
	}
	pd, ok := s.pds[req.PD]
	if !ok {
		proto.CloseFDs(fds)
		return nil, nil, notFound("protection domain", req.PD)
	}
	if req.Length == 0 || req.Length > engine.MaxMRSize {
		proto.CloseFDs(fds)
		return nil, nil, proto.Errorf(proto.CodeInvalid, "length %d: a region holds 1 byte to %d bytes", req.Length, uint64(engine.MaxMRSize))
	}
	region, err := shm.MapRegion(fds[0], int(req.Length))
	if err != nil {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	if err := region.Lock(); err != nil {
		region.Close()
		return nil, nil, proto.Errorf(proto.CodeMemlock, "the daemon %v", err)
	}
	mr, err := engine.RegisterMR(pd, region, req.Addr, req.Length, abi.Access(req.Access))
	if err != nil {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	h := s.handleID()
	s.mrs[h] = mr
	return proto.RegMRResp{Handle: h, LKey: mr.Key(), RKey: mr.Key()}, nil, nil
}

func (s *session) createQP(req proto.CreateQPReq) (any, []int, error) {
	pd, ok := s.pds[req.PD]
	if !ok {
		return nil, nil, notFound("protection domain", req.PD)
	}
	scq, ok := s.cqs[req.SendCQ]
	if !ok {
		return nil, nil, notFound("send completion queue", req.SendCQ)
	}
	rcq, ok := s.cqs[req.RecvCQ]
	if !ok {
		return nil, nil, notFound("receive completion queue", req.RecvCQ)
	}
	var srq *engine.RQ
	if req.SRQ != 0 {
		if srq, ok = s.srqs[req.SRQ]; !ok {
			return nil, nil, notFound("shared receive queue", req.SRQ)
		}
	}
	h := s.handleID()
	q, err := engine.NewQP(engine.QPConfig{
		PD: pd, Type: abi.QPType(req.Type), SendCQ: scq, RecvCQ: rcq, SRQ: srq, SigAll: req.SigAll,
		Caps: req.Caps, Handle: h, Events: s, AH: s.ah,
	})
	if err != nil {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	s.qps[h] = q
	sq, rq := q.SQ(), q.RQ()
	return proto.CreateQPResp{
		Handle: h, QPN: q.QPN(), Caps: q.Caps(), Size: q.Size(),
		SQ: proto.RingInfo{Offset: sq.Offset, Entries: sq.Entries, Stride: sq.Stride},
		RQ: proto.RingInfo{Offset: rq.Offset, Entries: rq.Entries, Stride: rq.Stride},
	}, []int{q.RegionFD(), q.DoorbellFD()}, nil
}
