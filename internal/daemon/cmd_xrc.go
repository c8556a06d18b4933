package daemon

// XRC domains (docs/design/xrc.md). A domain opened with a file is shared
// by every open of the same inode on the same adapter by the same uid, as
// the kernel shares it by inode per device; the uid in the key keeps a
// tenant from reaching another's domain by opening its file (DESIGN.md,
// "Who is trusted"). Each open is a handle of the session, charged as an
// xrcd; a handle with XRC SRQs or target QPs made through it cannot be
// closed (EBUSY, as the kernel's).

import (
	"sync"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// xrcdKey names a shared domain: adapter, uid and the file's inode.
type xrcdKey struct {
	adapter  *engine.Adapter
	uid      uint32
	dev, ino uint64
}

// sharedXRCD is a domain and how many handles (of any session) hold it.
type sharedXRCD struct {
	x      *engine.XRCD
	key    xrcdKey
	shared bool // opened with a file: in the daemon's table
	refs   int  // handles; under xrcdTable.mu
}

// xrcdTable holds the domains opened with files, and how many handles
// (of any session) hold each XRC_RECV QP (ibv_open_qp shares them).
type xrcdTable struct {
	mu   sync.Mutex
	m    map[xrcdKey]*sharedXRCD
	tgts map[*engine.QP]int
}

// holdTarget counts one more handle of target q.
func (t *xrcdTable) holdTarget(q *engine.QP) {
	t.mu.Lock()
	if t.tgts == nil {
		t.tgts = map[*engine.QP]int{}
	}
	t.tgts[q]++
	t.mu.Unlock()
}

// dropTarget counts one handle of target q less; last reports that it was
// the last, and q is to be destroyed.
func (t *xrcdTable) dropTarget(q *engine.QP) (last bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tgts[q]--
	if t.tgts[q] > 0 {
		return false
	}
	delete(t.tgts, q)
	return true
}

// xrcdHandle is one open of a domain by a session.
type xrcdHandle struct {
	dom   *sharedXRCD
	users int // XRC SRQs and target QPs made through it; under session.mu
}

// open returns the domain of key, creating it if create; exists reports
// that it was there already.
func (t *xrcdTable) open(key xrcdKey, create, excl bool) (*sharedXRCD, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.m[key]; d != nil {
		if create && excl {
			return nil, proto.Errorf(proto.CodeInvalid, "an XRC domain of this file is open already and oflags has O_EXCL: open it without O_EXCL to share it")
		}
		d.refs++
		return d, nil
	}
	if !create {
		return nil, proto.Errorf(proto.CodeNotFound, "no XRC domain of this file is open: pass O_CREAT in oflags to create it")
	}
	if t.m == nil {
		t.m = map[xrcdKey]*sharedXRCD{}
	}
	d := &sharedXRCD{x: engine.NewXRCD(key.adapter), key: key, shared: true, refs: 1}
	t.m[key] = d
	return d, nil
}

// release drops a handle's reference; the last one forgets the domain.
func (t *xrcdTable) release(d *sharedXRCD) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d.refs--
	if d.refs == 0 && d.shared && t.m[d.key] == d {
		delete(t.m, d.key)
	}
}

func cmdOpenXRCD(s *session, body []byte, fds []int) (any, []int, error) {
	defer proto.CloseFDs(fds)
	req, err := decode[proto.OpenXRCDReq](body)
	if err != nil {
		return nil, nil, err
	}
	if req.FD != (len(fds) == 1) || len(fds) > 1 {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "open_xrcd with fd %v came with %d descriptors: send exactly the one descriptor, or none for a private domain", req.FD, len(fds))
	}
	if req.OFlags&^(unix.O_CREAT|unix.O_EXCL) != 0 {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "oflags %#x: only O_CREAT and O_EXCL are defined for an XRC domain", req.OFlags)
	}
	if err := s.take(XRCDs, 1); err != nil {
		return nil, nil, err
	}
	var dom *sharedXRCD
	if req.FD {
		var st unix.Stat_t
		if err := unix.Fstat(fds[0], &st); err != nil {
			s.give(XRCDs, 1)
			return nil, nil, proto.Errorf(proto.CodeInvalid, "the XRC domain's file descriptor: %v", err)
		}
		key := xrcdKey{adapter: s.adapter, uid: s.cred.uid, dev: st.Dev, ino: st.Ino}
		dom, err = s.d.xrcds.open(key, req.OFlags&unix.O_CREAT != 0, req.OFlags&unix.O_EXCL != 0)
		if err != nil {
			s.give(XRCDs, 1)
			return nil, nil, err
		}
	} else {
		dom = &sharedXRCD{x: engine.NewXRCD(s.adapter), refs: 1}
	}
	h := s.handleID()
	s.xrcds[h] = &xrcdHandle{dom: dom}
	return proto.HandleReq{Handle: h}, nil, nil
}

func cmdCloseXRCD(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.HandleReq](body)
	if err != nil {
		return nil, nil, err
	}
	x, err := lookup(s.xrcds, req.Handle, "XRC domain")
	if err != nil {
		return nil, nil, err
	}
	if x.users > 0 {
		return nil, nil, proto.Errorf(proto.CodeBusy, "XRC domain %d still has %d XRC SRQs or XRC_RECV QPs opened through it: destroy them first", req.Handle, x.users)
	}
	delete(s.xrcds, req.Handle)
	s.d.xrcds.release(x.dom)
	s.give(XRCDs, 1)
	return done, nil, nil
}

// cmdOpenQP gives the session a handle of an XRC_RECV QP of the domain
// one of its XRC domain handles holds, made by another process (or this
// one): ibv_open_qp. The QP lives until its last handle is destroyed. The
// handle is charged as a QP; the QP's ring bytes stay charged to its
// creator until the creator destroys its handle.
func cmdOpenQP(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.OpenQPReq](body)
	if err != nil {
		return nil, nil, err
	}
	xh, err := lookup(s.xrcds, req.XRCD, "XRC domain")
	if err != nil {
		return nil, nil, err
	}
	q := s.adapter.QPByNumber(req.QPN)
	if q == nil || q.Type() != abi.QPTypeXRCRecv || q.XRCD() != xh.dom.x {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "no XRC_RECV QP 0x%x in XRC domain %d: open the QP number its creator reports, through a handle of the same domain", req.QPN, req.XRCD)
	}
	if err := s.take(QPs, 1); err != nil {
		return nil, nil, err
	}
	bell, err := q.ShareDoorbell()
	if err != nil {
		s.give(QPs, 1)
		return nil, nil, s.d.creationError("queue pair's doorbell", err)
	}
	fds, err := shareFDs(q.RegionFD, nil)
	if err != nil {
		unix.Close(bell)
		s.give(QPs, 1)
		return nil, nil, err
	}
	fds = append(fds, bell)
	s.d.xrcds.holdTarget(q)
	h := s.handleID()
	s.qps[h] = q
	s.openedQPs[h] = true
	s.xrcUse(h, xh)
	sq, rq := q.SQ(), q.RQ()
	return proto.CreateQPResp{
		Handle: h, QPN: q.QPN(), Caps: q.Caps(), Size: q.Size(),
		SQ:        proto.RingInfo{Offset: sq.Offset, Entries: sq.Entries, Stride: sq.Stride},
		RQ:        proto.RingInfo{Offset: rq.Offset, Entries: rq.Entries, Stride: rq.Stride},
		NotifyGen: true,
	}, fds, nil
}

// dropQP takes handle h of QP q from the session and gives back what it
// was charged. It destroys q unless q is an XRC_RECV QP other handles
// still hold; destroyed reports whether it did.
func (s *session) dropQP(h uint32, q *engine.QP) (destroyed bool) {
	delete(s.qps, h)
	s.xrcDrop(h)
	opened := s.openedQPs[h]
	delete(s.openedQPs, h)
	if opened {
		s.give(QPs, 1)
	} else {
		s.giveQueue(QPs, q.Footprint())
	}
	if q.Type() == abi.QPTypeXRCRecv && !s.d.xrcds.dropTarget(q) {
		return false
	}
	attached := q.McastAttachments()
	q.Destroy()
	s.give(Mcast, uint64(attached))
	return true
}

// xrcUse records that object h (an XRC SRQ or target QP) was made through
// handle x; xrcDrop forgets it when h is destroyed.
func (s *session) xrcUse(h uint32, x *xrcdHandle) {
	x.users++
	s.xrcObjs[h] = x
}

func (s *session) xrcDrop(h uint32) {
	if x := s.xrcObjs[h]; x != nil {
		x.users--
		delete(s.xrcObjs, h)
	}
}

// closeXRCDs releases every handle at the session's end (its SRQs and QPs
// are gone by then).
func (s *session) closeXRCDs() {
	for h, x := range s.xrcds {
		s.d.xrcds.release(x.dom)
		delete(s.xrcds, h)
	}
	clear(s.xrcObjs)
}
