package daemon

import (
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// cmdAllocMW allocates a memory window (ibv_alloc_mw), charged to the
// tenant's mw limit. Binding and invalidating it are work requests the
// engine runs; deallocation (or the session's end) removes its rkey.
func cmdAllocMW(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.AllocMWReq](body)
	if err != nil {
		return nil, nil, err
	}
	if req.Type != engine.MWType1 && req.Type != engine.MWType2 {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "memory window type %d: the types are 1 (IBV_MW_TYPE_1) and 2 (IBV_MW_TYPE_2)", req.Type)
	}
	pd, err := lookup(s.pds, req.PD, "protection domain")
	if err != nil {
		return nil, nil, err
	}
	if err := s.take(MWs, 1); err != nil {
		return nil, nil, err
	}
	w, err := engine.AllocMW(pd, req.Type)
	if err != nil {
		s.give(MWs, 1)
		return nil, nil, proto.Errorf(proto.CodeLimit, "%v", err)
	}
	h := s.handleID()
	s.mws[h] = w
	return proto.AllocMWResp{Handle: h, RKey: w.Key()}, nil, nil
}

// cmdDeallocMW deallocates a memory window (ibv_dealloc_mw): its rkey
// grants nothing from then on.
func cmdDeallocMW(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.HandleReq](body)
	if err != nil {
		return nil, nil, err
	}
	w, err := lookup(s.mws, req.Handle, "memory window")
	if err != nil {
		return nil, nil, err
	}
	w.Dealloc()
	delete(s.mws, req.Handle)
	s.give(MWs, 1)
	return done, nil, nil
}
