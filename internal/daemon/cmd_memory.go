package daemon

import (
	"math"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

func cmdQueryDevice(s *session, _ []byte, _ []int) (any, []int, error) {
	return deviceAttr(s.adapter, s.limits()), nil, nil
}

func cmdQueryPort(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.QueryPortReq](body)
	if err != nil {
		return nil, nil, err
	}
	if req.Port != 1 {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "port %d does not exist: vrdma adapters have one port, number 1", req.Port)
	}
	return portAttr(s.adapter), nil, nil
}

func cmdAllocPD(s *session, _ []byte, _ []int) (any, []int, error) {
	if err := s.take(PDs, 1); err != nil {
		return nil, nil, err
	}
	h := s.handleID()
	s.pds[h] = s.adapter.NewPD()
	return proto.HandleResp{Handle: h}, nil, nil
}

func cmdDeallocPD(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.HandleReq](body)
	if err != nil {
		return nil, nil, err
	}
	pd, err := lookup(s.pds, req.Handle, "protection domain")
	if err != nil {
		return nil, nil, err
	}
	for _, m := range s.mrs {
		if m.PD() == pd {
			return nil, nil, proto.Errorf(proto.CodeBusy, "protection domain %d still has memory regions: deregister them first", req.Handle)
		}
	}
	for _, w := range s.mws {
		if w.PD() == pd {
			return nil, nil, proto.Errorf(proto.CodeBusy, "protection domain %d still has memory windows: deallocate them first", req.Handle)
		}
	}
	for _, q := range s.qps {
		if q.PD() == pd {
			return nil, nil, proto.Errorf(proto.CodeBusy, "protection domain %d still has queue pairs: destroy them first", req.Handle)
		}
	}
	for _, r := range s.srqs {
		if r.PD() == pd {
			return nil, nil, proto.Errorf(proto.CodeBusy, "protection domain %d still has shared receive queues: destroy them first", req.Handle)
		}
	}
	s.ahMu.Lock()
	defer s.ahMu.Unlock()
	for ah, p := range s.ahPD {
		if p == pd {
			return nil, nil, proto.Errorf(proto.CodeBusy, "protection domain %d still has address handle %d: destroy it first", req.Handle, ah)
		}
	}
	delete(s.pds, req.Handle)
	s.give(PDs, 1)
	return done, nil, nil
}

// cmdRegMR maps bytes [Offset, Offset+Length) of the sealed memfd that comes
// with the request as a region. The daemon maps, locks and charges the pages
// that hold them, from the page of Offset on (shm.MapRegionRange); or, for
// a request with segments, the segments' pages, mapped one after the other
// (shm.MapSegments).
func cmdRegMR(s *session, body []byte, fds []int) (any, []int, error) {
	req, err := decode[proto.RegMRReq](body)
	if err != nil {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	pd, err := lookup(s.pds, req.PD, "protection domain")
	if err != nil {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	// The charge comes first, on the declared range: a tenant at its limit
	// must not have the daemon map (up to MaxMRSize of a sparse memfd per
	// request) what it then refuses. Nothing is locked until it is taken.
	locked, err := checkRegistration("reg_mr", &req, len(fds))
	if err != nil {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	pinned := pinCharge(&req, locked)
	proc, err := s.pin(pinned)
	if err != nil {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	if err := s.take(MRs, 1); err != nil {
		s.unpin(proc, pinned)
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	if err := s.take(Locked, locked); err != nil {
		s.give(MRs, 1)
		s.unpin(proc, pinned)
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	giveBack := func() { s.give(MRs, 1); s.give(Locked, locked); s.unpin(proc, pinned) }
	region, err := mapLocked(&req, fds) // owns fds from here
	if err != nil {
		giveBack()
		return nil, nil, err
	}
	mr, err := engine.RegisterMR(pd, region, req.Addr, req.Length, abi.Access(req.Access))
	if err != nil {
		giveBack()
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	h := s.handleID()
	s.mrs[h] = mr
	s.mrPins[h] = proc
	lkey, rkey := mr.DeviceKeys()
	return proto.RegMRResp{Handle: h, LKey: lkey, RKey: rkey}, nil, nil
}

// checkRegistration checks what a reg_mr or rereg_mr request (op) says of
// its memory, carried in nfds descriptors, and returns how many bytes
// mapping it locks.
func checkRegistration(op string, req *proto.RegMRReq, nfds int) (locked uint64, err error) {
	if len(req.Segments) == 0 && nfds != 1 {
		return 0, proto.Errorf(proto.CodeInvalid, "%s carries exactly one memfd, got %d descriptors", op, nfds)
	}
	if req.Length == 0 || req.Length > engine.MaxMRSize {
		return 0, proto.Errorf(proto.CodeInvalid, "length %d: a region holds 1 byte to %d bytes", req.Length, uint64(engine.MaxMRSize))
	}
	if req.Offset > math.MaxUint64-req.Length {
		return 0, proto.Errorf(proto.CodeInvalid, "offset %d + length %d overflows 64 bits: the region must lie inside its memfd", req.Offset, req.Length)
	}
	if len(req.Segments) > 0 {
		return checkSegments(req, nfds, uint64(unix.Getpagesize()))
	}
	return shm.MappedSize(req.Offset, req.Length), nil
}

// mapLocked maps a checked registration's memory (mapRegistration, which
// owns fds) and locks it, unless it is on demand (odp.go).
func mapLocked(req *proto.RegMRReq, fds []int) (*shm.Region, error) {
	region, err := mapRegistration(req, fds)
	if err != nil {
		return nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	if onDemand(req) {
		return region, nil
	}
	if err := region.Lock(); err != nil {
		region.Close()
		return nil, proto.Errorf(proto.CodeMemlock, "the daemon %v", err)
	}
	return region, nil
}

// mapRegistration maps a checked registration's memory, taking ownership of
// fds: from its segments when it has some, read-only when the region grants
// no write (the library maps read-only application memory read-only too).
func mapRegistration(req *proto.RegMRReq, fds []int) (*shm.Region, error) {
	if len(req.Segments) == 0 {
		return shm.MapRegionRange(fds[0], req.Offset, req.Length)
	}
	prot := unix.PROT_READ
	if abi.Access(req.Access)&abi.AccessLocalWrite != 0 {
		prot |= unix.PROT_WRITE
	}
	segs := make([]shm.Segment, len(req.Segments))
	for i, sg := range req.Segments {
		segs[i] = shm.Segment{FD: fds[i], Offset: sg.Offset, Length: sg.Length}
	}
	return shm.MapSegments(segs, req.Offset, req.Length, prot)
}

func cmdDeregMR(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.HandleReq](body)
	if err != nil {
		return nil, nil, err
	}
	mr, err := lookup(s.mrs, req.Handle, "memory region")
	if err != nil {
		return nil, nil, err
	}
	locked, pinned := mr.Mapped(), pinnedBy(mr)
	mr.Deregister()
	delete(s.mrs, req.Handle)
	s.unpin(s.mrPins[req.Handle], pinned)
	delete(s.mrPins, req.Handle)
	s.give(MRs, 1)
	s.give(Locked, locked)
	return done, nil, nil
}

// cmdMapMR hands a direct-path initiator the peer's region with an rkey:
// only for an RC QP in RTS connected to a live local QP of a trusting
// adapter, and only a region of that QP's protection domain. The reply's
// descriptor is a duplicate, closed once sent.
func cmdMapMR(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.MapMRReq](body)
	if err != nil {
		return nil, nil, err
	}
	q, err := lookup(s.qps, req.QP, "queue pair")
	if err != nil {
		return nil, nil, err
	}
	if !q.Direct() {
		return nil, nil, proto.Errorf(proto.CodePermission, "QP 0x%x has no direct path: it must be an RC QP in RTS connected to a QP of a trusted adapter on this host", q.QPN())
	}
	p := q.Peer()
	if p == nil {
		return nil, nil, proto.Errorf(proto.CodeState, "QP 0x%x lost its peer", q.QPN())
	}
	mr := p.LookupMR(req.RKey)
	if mr == nil {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "no region with rkey 0x%x in the peer's protection domain", req.RKey)
	}
	if _, _, _, access := mr.Info(); access&(abi.AccessRemoteRead|abi.AccessRemoteWrite|abi.AccessRemoteAtomic) == 0 {
		return nil, nil, proto.Errorf(proto.CodePermission, "region 0x%x grants no remote access", req.RKey)
	}
	sh, err := mr.ShareWith(q)
	if err != nil {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "%v", err)
	}
	return proto.MapMRResp{Addr: sh.Addr, Length: sh.Length, Offset: sh.Offset, Access: uint32(sh.Access), PeerAccess: uint32(p.PeerAccess())}, []int{sh.FD}, nil
}

func cmdCreateAH(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.CreateAHReq](body)
	if err != nil {
		return nil, nil, err
	}
	pd, err := lookup(s.pds, req.PD, "protection domain")
	if err != nil {
		return nil, nil, err
	}
	if n := min(len(s.adapter.GIDs()), engine.GIDTable); int(req.AV.SGIDIndex) >= n {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "sgid_index %d is outside the GID table of %d entries", req.AV.SGIDIndex, n)
	}
	if err := s.d.lids.resolveDLID(s.adapter, s.lidRouting(), &req.AV, proto.CodeInvalid); err != nil {
		return nil, nil, err
	}
	if err := s.take(AHs, 1); err != nil {
		return nil, nil, err
	}
	h := s.handleID()
	if u := s.adapter.Uplink(); u != nil {
		// A bound instance's UD QPs send through the device's own address
		// handle (docs/design/verbs-uplink-binding.md "UD and address handles").
		if err := pd.CreateDeviceAH(h, req.AV); err != nil {
			s.give(AHs, 1)
			return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", err)
		}
	}
	s.ahMu.Lock()
	s.ahs[h] = req.AV
	s.ahPD[h] = pd
	s.ahMu.Unlock()
	return proto.HandleResp{Handle: h}, nil, nil
}

func cmdDestroyAH(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.HandleReq](body)
	if err != nil {
		return nil, nil, err
	}
	for _, q := range s.qps {
		q.SendPending() // datagrams posted to the handle leave before it goes
	}
	s.ahMu.Lock()
	defer s.ahMu.Unlock()
	if _, err := lookup(s.ahs, req.Handle, "address handle"); err != nil {
		return nil, nil, err
	}
	if pd := s.ahPD[req.Handle]; pd != nil && s.adapter.Uplink() != nil {
		pd.DestroyDeviceAH(req.Handle)
	}
	delete(s.ahs, req.Handle)
	delete(s.ahPD, req.Handle)
	s.give(AHs, 1)
	return done, nil, nil
}
