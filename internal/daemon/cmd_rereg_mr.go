package daemon

import (
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
)

// cmdReregMR replaces a region by the registration the request describes
// (ibv_rereg_mr: new memory, PD or access), under the same keys, so that a
// peer that holds the rkey reaches the new region. The new memory is
// checked, charged, mapped and locked as reg_mr's before the old region is
// touched; only then does the new region take the old one's place and the
// old one's charge is given back. On any error the old region stays.
func cmdReregMR(s *session, body []byte, fds []int) (any, []int, error) {
	req, err := decode[proto.ReregMRReq](body)
	if err != nil {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	old, err := lookup(s.mrs, req.Handle, "memory region")
	if err != nil {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	pd, err := lookup(s.pds, req.PD, "protection domain")
	if err != nil {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	locked, err := checkRegistration("rereg_mr", &req.RegMRReq, len(fds))
	if err != nil {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	// Both regions are charged while the new one is made: the old one's
	// charge comes back after the switch.
	pinned := pinCharge(&req.RegMRReq, locked)
	proc, err := s.pin(pinned)
	if err != nil {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	if err := s.take(Locked, locked); err != nil {
		s.unpin(proc, pinned)
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	giveBack := func() { s.give(Locked, locked); s.unpin(proc, pinned) }
	region, err := mapLocked(&req.RegMRReq, fds) // owns fds from here
	if err != nil {
		giveBack()
		return nil, nil, err
	}
	oldLocked, oldPinned := old.Mapped(), pinnedBy(old)
	mr, err := old.Reregister(pd, region, req.Addr, req.Length, abi.Access(req.Access))
	if err != nil {
		giveBack()
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	s.unpin(s.mrPins[req.Handle], oldPinned)
	s.give(Locked, oldLocked)
	s.mrs[req.Handle] = mr
	s.mrPins[req.Handle] = proc
	return proto.RegMRResp{Handle: req.Handle, LKey: mr.Key(), RKey: mr.Key()}, nil, nil
}
