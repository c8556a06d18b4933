package daemon

import "github.com/vrdma/vrdma/internal/proto"

func cmdHello(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.HelloReq](body)
	if err != nil {
		return nil, nil, err
	}
	if s.instance() != nil {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "hello sent twice on one connection")
	}
	inst, err := s.d.insts.attach(s, req.Instance, req.Device)
	if err != nil {
		return nil, nil, err
	}
	resp := proto.HelloResp{Version: proto.Version, Instance: s.shown(inst.Name), Host: s.d.cfg.HostName}
	for _, a := range inst.Adapters {
		resp.Adapters = append(resp.Adapters, adapterInfo(a))
	}
	if s.adapter != nil {
		info := adapterInfo(s.adapter)
		resp.Device = &info
		resp.Attr = deviceAttr(s.adapter, s.limits())
	}
	return resp, nil, nil
}

// cmdCreateInstance creates an instance for the peer, or, for an
// administrator, for the owner the spec names.
func cmdCreateInstance(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.InstanceSpec](body)
	if err != nil {
		return nil, nil, err
	}
	owner, err := s.d.access.ownerFor(s.cred, req)
	if err != nil {
		return nil, nil, err
	}
	if req, err = ownSpec(req, owner.UID, true); err != nil {
		return nil, nil, err
	}
	if err := validateSpec(req); err != nil {
		return nil, nil, err
	}
	if err := s.d.sw.check(req); err != nil {
		return nil, nil, err
	}
	inst, err := s.d.insts.create(req, owner, s, true, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := s.d.sw.publish(inst); err != nil {
		_, _ = s.d.insts.delete(inst.Name, nil)
		return nil, nil, err
	}
	s.d.lids.switchChanged() // an assignment may be there already
	s.d.lids.awaitSwitch(inst)
	return instanceInfo(inst, s.d.cfg.HostName, s.cred), nil, nil
}

func cmdDeleteInstance(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.InstanceSpec](body)
	if err != nil {
		return nil, nil, err
	}
	name, err := s.d.insts.delete(req.Name, s)
	if err != nil {
		return nil, nil, err
	}
	s.d.sw.unpublish(name)
	return done, nil, nil
}

// cmdListInstances lists the instances the peer may see; All adds the
// other hosts' from the switch, whose records carry no owner: for
// administrators only.
func cmdListInstances(s *session, body []byte, _ []int) (any, []int, error) {
	var req proto.ListInstancesReq
	if len(body) > 0 && string(body) != "null" {
		var err error
		if req, err = decode[proto.ListInstancesReq](body); err != nil {
			return nil, nil, err
		}
	}
	list := s.d.insts.list(s.cred)
	if req.All {
		if !s.d.access.isAdmin(s.cred) {
			return nil, nil, proto.Errorf(proto.CodePermission, "other hosts' instances are listed for root, the daemon's user and %s (their records carry no owner); %s sees this host's own: leave --all out",
				s.d.access.adminGroupName(), s.cred)
		}
		remote, err := s.d.sw.remote()
		if err != nil {
			return nil, nil, err
		}
		list = append(list, remote...)
	}
	return proto.ListInstancesResp{Instances: list}, nil, nil
}

func cmdStats(s *session, _ []byte, _ []int) (any, []int, error) {
	return s.d.Stats(), nil, nil
}
