package daemon

// Routing a session's connection manager commands: to the device's own CM
// for a session whose adapter is bound to a verbs uplink (cm_device.go),
// to the daemon's CM otherwise.

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
)

// deviceCM returns the device CM of the verbs link s's adapter is bound
// to, nil if it is not bound.
func (s *session) deviceCM() (*deviceCM, error) {
	if s.adapter == nil {
		return nil, nil
	}
	u := s.adapter.Uplink()
	if u == nil {
		return nil, nil
	}
	return s.d.deviceCMOf(u.Name)
}

// deviceCMOf opens (once per device) the CM of verbs link name.
func (d *Daemon) deviceCMOf(name string) (*deviceCM, error) {
	t := &d.links
	t.mu.Lock()
	e, ok := t.m[name]
	t.mu.Unlock()
	if !ok || e.spec.Type != verbsLinkType {
		return nil, proto.Errorf(proto.CodeNotFound, "the instance's verbs link %s is gone: rdma_cm needs it (`vrdma link add %s type verbs dev IBDEV`)", name, name)
	}
	v := &e.verbs
	v.mu.Lock()
	dev, mtu, eng := v.dev, uint8(v.port.ActiveMTU), v.eng
	v.mu.Unlock()
	if dev == nil || eng == nil {
		return nil, proto.Errorf(proto.CodeState, "verbs link %s has no open device (`vrdma link show %s` says why)", name, name)
	}
	v.cmMu.Lock()
	defer v.cmMu.Unlock()
	if v.cm != nil && v.cmDev == dev {
		return v.cm, nil
	}
	m, err := newDeviceCM(name, dev, eng.GIDs, mtu, d.log.With("part", "cm", "link", name))
	if err != nil {
		return nil, err
	}
	v.cm, v.cmDev = m, dev
	return m, nil
}

// closeDeviceCM destroys what the session held on its device's CM.
func (s *session) closeDeviceCM() {
	if s.adapter == nil || s.adapter.Uplink() == nil {
		return
	}
	t := &s.d.links
	t.mu.Lock()
	e, ok := t.m[s.adapter.Uplink().Name]
	t.mu.Unlock()
	if !ok {
		return
	}
	e.verbs.cmMu.Lock()
	m := e.verbs.cm
	e.verbs.cmMu.Unlock()
	if m != nil {
		m.CloseSession(s.cm())
	}
}

// privileged reports whether s's process may take the host's ports below
// 1024 (root's, as the kernel keeps them).
func (s *session) privileged() bool { return s.cred.known && s.cred.uid == 0 }

// answeringQPN returns the number of s's QP h, which answers a request
// from a QP of type want (UD answers UD, RC answers RC), as the software
// CM checks, once the receives it has posted are on its device: the peer
// sends as soon as it has the answer; s.mu is held.
func (s *session) answeringQPN(h uint32, want abi.QPType) (uint32, error) {
	q, err := lookup(s.qps, h, "queue pair")
	if err != nil {
		return 0, err
	}
	if q.Type() != want {
		return 0, proto.Errorf(proto.CodeInvalid, "the request is from a %v QP, answered by a %v QP, and QP %d is %v", want, want, h, q.Type())
	}
	q.HandPostedRecvs()
	return q.QPN(), nil
}

// dialingQPN returns the number of s's QP h for a connection's request,
// once the receives it has posted are on its device: the peer may send
// as soon as it answers; s.mu is held.
func (s *session) dialingQPN(h uint32) (uint32, error) {
	q, err := lookup(s.qps, h, "queue pair")
	if err != nil {
		return 0, err
	}
	q.HandPostedRecvs()
	return q.QPN(), nil
}
