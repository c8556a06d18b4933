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

func cmdCreateInstance(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.InstanceSpec](body)
	if err != nil {
		return nil, nil, err
	}
	if err := s.d.checkInstance(req); err != nil {
		return nil, nil, err
	}
	inst, err := s.d.createInstance(req, true)
	if err != nil {
		return nil, nil, err
	}
	if err := s.d.publishInstance(inst); err != nil {
		_ = s.d.deleteInstance(inst.Name)
		return nil, nil, err
	}
	return instanceInfo(inst, s.d.cfg.HostName), nil, nil
}

func cmdDeleteInstance(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.InstanceSpec](body)
	if err != nil {
		return nil, nil, err
	}
	if err := s.d.deleteInstance(req.Name); err != nil {
		return nil, nil, err
	}
	s.d.unpublishInstance(req.Name)
	return done, nil, nil
}

func cmdListInstances(s *session, body []byte, _ []int) (any, []int, error) {
	var req proto.ListInstancesReq
	if len(body) > 0 && string(body) != "null" {
		var err error
		if req, err = decode[proto.ListInstancesReq](body); err != nil {
			return nil, nil, err
		}
	}
	list := s.d.listInstances()
	if req.All {
		remote, err := s.d.remoteInstances()
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
