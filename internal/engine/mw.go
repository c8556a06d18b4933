package engine

// Memory windows, as rdma_rxe has them (drivers/infiniband/sw/rxe/rxe_mw.c):
// a window's rkey grants remote access to a range of a region that allows
// binding (abi.AccessMWBind), with access of its own, until the window is
// bound anew, invalidated or deallocated.
//
// A window lives in the adapter's key table as an MR entry whose window
// field points back to it, so that resolving an rkey stays one lock-free
// load whether it names a region or a window. Binding and invalidating put
// a new entry in the window's slot (the table's replace): entries never
// change once published, and an operation that resolved the old one uses
// the old range to its end, as one that raced the bind on a real device
// would. A bound entry borrows its region's memory: acquiring it pins the
// region (MR.acquire), and once the region is deregistered the window
// grants nothing.

import (
	"fmt"
	"sync"

	"github.com/vrdma/vrdma/internal/abi"
)

// MW types (enum ibv_mw_type).
const (
	MWType1 = 1
	MWType2 = 2
)

// MW is a memory window of a protection domain.
type MW struct {
	pd  *PD
	typ uint8

	mu   sync.Mutex
	cur  *MR // the entry the key table holds for the window
	dead bool
}

// AllocMW allocates a window of type typ (MWType1 or MWType2) in pd. Its
// rkey (Key) grants nothing until it is bound.
func AllocMW(pd *PD, typ uint8) (*MW, error) {
	if typ != MWType1 && typ != MWType2 {
		return nil, fmt.Errorf("memory window type %d: the types are 1 and 2", typ)
	}
	w := &MW{pd: pd, typ: typ}
	e := &MR{pd: pd, window: w}
	if err := pd.adapter.addMR(e); err != nil {
		return nil, err
	}
	w.cur = e
	return w, nil
}

// Key returns the window's current rkey; a bind changes its low 8 bits.
func (w *MW) Key() uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur.key
}

// Type returns the window's type, 1 or 2.
func (w *MW) Type() uint8 { return w.typ }

// Dealloc removes the window: its rkey grants nothing from now on.
func (w *MW) Dealloc() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead {
		return
	}
	w.dead = true
	w.pd.adapter.removeMR(w.cur)
}

// A bind work request (abi.OpBindMW) carries its arguments in the send
// WQE's fields: Imm the window's current rkey, RKey the new rkey (only its
// low 8 bits count: the window keeps its index), AH the region's lkey,
// RemoteAddr and CompareAdd the range's address and length, Swap the
// window's access flags (low 32 bits). Length 0 unbinds a type 1 window.
// A local invalidate (abi.OpLocalInv) and a SEND_WITH_INV carry the rkey
// to invalidate in Imm.

// bindMW runs a bind work request on q: the completion's status.
func (q *QP) bindMW(wr *abi.SendWQE) abi.Status {
	a := q.adapter
	e := a.mrs.lookup(wr.Imm)
	if e == nil || e.window == nil || e.pd != q.pd {
		return abi.StatusMWBindErr
	}
	w := e.window
	access := abi.Access(uint32(wr.Swap))
	length := wr.CompareAdd
	if access&^(abi.AccessRemoteWrite|abi.AccessRemoteRead|abi.AccessRemoteAtomic|abi.AccessLocalWrite) != 0 {
		return abi.StatusMWBindErr
	}
	n := &MR{pd: w.pd, window: w, key: e.key&^0xff | wr.RKey&0xff}
	if length != 0 {
		mr := a.lookupMR(wr.AH)
		if mr == nil || mr.pd != q.pd || mr.access&abi.AccessMWBind == 0 {
			return abi.StatusMWBindErr
		}
		// As a region's: remote write and atomic access need local write
		// on the region (rxe_check_bind_mw).
		if access&(abi.AccessRemoteWrite|abi.AccessRemoteAtomic) != 0 && mr.access&abi.AccessLocalWrite == 0 {
			return abi.StatusMWBindErr
		}
		if wr.RemoteAddr < mr.addr || length > mr.length || wr.RemoteAddr-mr.addr > mr.length-length {
			return abi.StatusMWBindErr
		}
		off := wr.RemoteAddr - mr.addr
		n.parent, n.addr, n.length, n.access = mr, wr.RemoteAddr, length, access
		n.mem = mr.mem[off : off+length]
		if w.typ == MWType2 {
			n.qp = q
			n.unbound = &MR{pd: w.pd, window: w, key: n.key}
		}
	} else if w.typ == MWType2 {
		return abi.StatusMWBindErr // a type 2 window is unbound by invalidation
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead || w.cur != e {
		return abi.StatusMWBindErr // deallocated or bound anew meanwhile
	}
	// A type 2 window binds only when free (invalidated or never bound).
	if w.typ == MWType2 && e.parent != nil {
		return abi.StatusMWBindErr
	}
	if !a.mrs.replace(e, n) {
		return abi.StatusMWBindErr
	}
	w.cur = n
	return abi.StatusSuccess
}

// invalidate unbinds the type 2 window with rkey on adapter a, in pd; false
// when rkey names no such window or one that is not bound. The window keeps
// its rkey, which grants nothing until it is bound again.
func invalidate(a *Adapter, pd *PD, rkey uint32) bool {
	e := a.mrs.lookup(rkey)
	if e == nil || e.window == nil || e.pd != pd || e.window.typ != MWType2 || e.parent == nil {
		return false
	}
	w := e.window
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead || w.cur != e {
		return false
	}
	n := e.unbound // made at the bind: used once, as e is replaced once
	if n == nil {
		n = &MR{pd: w.pd, window: w, key: e.key}
	}
	if !a.mrs.replace(e, n) {
		return false
	}
	w.cur = n
	return true
}

// localInvalidate runs a local invalidate work request on q.
func (q *QP) localInvalidate(wr *abi.SendWQE) abi.Status {
	if !invalidate(q.adapter, q.pd, wr.Imm) {
		return abi.StatusMWBindErr
	}
	return abi.StatusSuccess
}

// grantsIn reports whether entry m, found under an rkey by responder QP p,
// lets p's requester access it with need: a region or a window of pd (p's
// PD; an XRC target's is that of the SRQ the request named) with the
// access, and a type 2 window bound through p. Allocation-free.
func (m *MR) grantsIn(p *QP, pd *PD, need abi.Access) bool {
	return m != nil && pd != nil && m.pd == pd && m.access&need == need && (m.qp == nil || m.qp == p)
}

// PD returns the window's protection domain.
func (w *MW) PD() *PD { return w.pd }
