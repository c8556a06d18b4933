package vrdma

import (
	"time"

	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
)

// The direct path. Between adapters that trust each other (the adapters of
// one instance, or of instances in one trust group), an RC QP connected on
// the same host runs its one-sided operations — RDMA WRITE, RDMA READ and
// atomics — in the caller's own thread: the daemon hands it a mapping of the
// peer's region on first use of each rkey (OpMapMR), and the library does
// the checks the daemon would do (keys, bounds, access flags of the region
// and of the responder QP, alignment) and the one copy, and puts the
// completion straight on its own CQ. Anything the checks would refuse, and
// any request behind one still queued for the daemon, takes the daemon's
// path instead, so errors and ordering are exactly the daemon's.
// docs/design/trusted-direct-path.md says why and what it buys.

// mapRetryPause is how long a refused mapping keeps requests on the
// daemon's path before the library asks again.
const mapRetryPause = time.Millisecond

// maxDirectBytes is the largest request the direct path runs. A peer's
// deregistration waits for a running direct operation (a bounded wait,
// engine.RevokeWait), so each must be short; larger ones cost their copy
// on the daemon's path as here, and the hop is nothing next to it.
const maxDirectBytes = 16 << 20

type remoteMR struct {
	region     *shm.Region
	mem        []byte
	addr       uint64
	access     ibv.Access
	peerAccess ibv.Access
}

// span returns n bytes at the owner's address addr, or nil.
func (m *remoteMR) span(addr uint64, n uint32) []byte {
	if addr < m.addr || addr-m.addr > uint64(len(m.mem)) || uint64(n) > uint64(len(m.mem))-(addr-m.addr) {
		return nil
	}
	off := addr - m.addr
	return m.mem[off : off+uint64(n)]
}

// remote returns the mapping of the peer's region with rkey, asking the
// daemon the first time. q.smu is held and no direct operation is marked
// busy: a deregistration in this very process may be waiting for that.
func (q *QP) remote(rkey uint32) *remoteMR {
	if m, ok := q.rmrs[rkey]; ok {
		return m
	}
	// A refusal (the peer not connected back yet, an unknown rkey) sends
	// requests to the daemon's path; ask again only after a pause, so that
	// a peer that never comes does not cost a round trip per request.
	if now := time.Now(); now.Before(q.mapRetry) {
		return nil
	}
	var r proto.MapMRResp
	fds, err := q.d.c.call(proto.OpMapMR, proto.MapMRReq{QP: q.handle, RKey: rkey}, &r)
	if err != nil || len(fds) != 1 {
		proto.CloseFDs(fds)
		q.mapRetry = time.Now().Add(mapRetryPause)
		return nil
	}
	// The region is bytes [Offset, Offset+Length) of the memfd: a guest
	// library's registration of application memory starts inside a page.
	mapRange := shm.MapRegionRange
	if ibv.Access(r.Access)&(ibv.AccessRemoteWrite|ibv.AccessRemoteAtomic) == 0 {
		mapRange = shm.MapRegionRangeReadOnly // the daemon passed a read-only descriptor
	}
	region, err := mapRange(fds[0], r.Offset, r.Length)
	if err != nil {
		q.mapRetry = time.Now().Add(mapRetryPause)
		return nil
	}
	m := &remoteMR{region: region, mem: region.Bytes(), addr: r.Addr, access: ibv.Access(r.Access), peerAccess: ibv.Access(r.PeerAccess)}
	if q.rmrs == nil {
		q.rmrs = make(map[uint32]*remoteMR)
	}
	q.rmrs[rkey] = m
	return m
}

// unmapRemotes drops every cached peer mapping. q.smu is held.
func (q *QP) unmapRemotes() {
	for k, m := range q.rmrs {
		m.region.Close()
		delete(q.rmrs, k)
	}
}

// localSpans resolves wr's SGEs in this process's regions of q's PD; the
// daemon's rules: every key known, every range inside its region, and
// LOCAL_WRITE where the operation writes local memory.
func (q *QP) localSpans(sgl []ibv.SGE, needWrite bool) ([][]byte, uint64, bool) {
	out := q.spans[:0]
	var total uint64
	q.d.mu.Lock()
	defer q.d.mu.Unlock()
	for _, s := range sgl {
		if s.Length == 0 {
			continue
		}
		m := q.d.mrs[s.LKey]
		if m == nil || m.pd != q.pd || (needWrite && m.access&ibv.AccessLocalWrite == 0) {
			return nil, 0, false
		}
		base := m.Addr()
		if s.Addr < base || s.Addr-base > uint64(len(m.buf)) || uint64(s.Length) > uint64(len(m.buf))-(s.Addr-base) {
			return nil, 0, false
		}
		off := s.Addr - base
		out = append(out, m.buf[off:off+uint64(s.Length)])
		total += uint64(s.Length)
	}
	return out, total, total <= 1<<31
}

// tryDirect runs wr in this thread if the direct path may and the checks
// pass. It reports whether it did; if not, wr goes to the daemon. q.smu is
// held and the send queue is empty.
func (q *QP) tryDirect(wr *SendWR) bool {
	var need ibv.Access
	atomic := false
	switch wr.Opcode {
	case ibv.WRRDMAWrite:
		need = ibv.AccessRemoteWrite
	case ibv.WRRDMARead:
		need = ibv.AccessRemoteRead
	case ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd:
		need, atomic = ibv.AccessRemoteAtomic, true
	default:
		return false
	}
	if wr.Inline != nil || wr.Flags&ibv.SendInline != 0 {
		return false
	}
	signaled := q.sigAll || wr.Flags&ibv.SendSignaled != 0
	if signaled && !q.sendCQ.canPushLocal() {
		return false
	}
	local, total, ok := q.localSpans(wr.SGL, wr.Opcode != ibv.WRRDMAWrite)
	if !ok || total > maxDirectBytes || (atomic && (len(wr.SGL) != 1 || total != 8)) {
		return false
	}
	// Mappings of a generation the daemon has revoked (the peer deregistered
	// a region this QP mapped) are dropped; a dead rkey's mapping is then
	// refused, and its request fails on the daemon's path.
	if g := shm.Load32(q.mem, abi.QPRevokeOff); g != q.revoke {
		q.unmapRemotes()
		q.revoke = g
	}
	m := q.remote(wr.RKey)
	if m == nil || m.access&need != need || m.peerAccess&need != need {
		return false
	}
	var rem []byte
	if total > 0 || atomic {
		if rem = m.span(wr.RemoteAddr, uint32(total)); rem == nil {
			return false
		}
	}
	if atomic && (wr.RemoteAddr%8 != 0 || !shm.Aligned8(rem, 0)) {
		return false
	}
	// Busy, then the revoke word again (engine/revoke.go): either this sees
	// a revocation that came after the mapping and touches nothing, or the
	// daemon sees busy and its deregistration waits for the store of 0.
	shm.Store32(q.mem, abi.QPDirectBusyOff, 1)
	if shm.Load32(q.mem, abi.QPRevokeOff) != q.revoke {
		shm.Store32(q.mem, abi.QPDirectBusyOff, 0)
		return false
	}
	q.runDirect(wr, local, rem)
	shm.Store32(q.mem, abi.QPDirectBusyOff, 0)
	if signaled {
		q.sendCQ.pushLocal(WorkCompletion{ID: wr.ID, Status: ibv.WCSuccess, Opcode: wr.Opcode.CompletionOpcode(), ByteLen: uint32(total), QPNum: q.qpn})
	}
	return true
}

// runDirect does the operation's copy or atomic between local and the
// peer's rem, every check passed.
func (q *QP) runDirect(wr *SendWR, local [][]byte, rem []byte) {
	switch {
	case wr.Opcode == ibv.WRRDMAWrite:
		n := 0
		for _, s := range local {
			n += copy(rem[n:], s)
		}
	case wr.Opcode == ibv.WRRDMARead:
		n := 0
		for _, s := range local {
			n += copy(s, rem[n:])
		}
	default:
		var orig uint64
		if wr.Opcode == ibv.WRAtomicCmpAndSwp {
			orig = shm.CompareAndSwap64(rem, 0, wr.CompareAdd, wr.Swap)
		} else {
			orig = shm.FetchAdd64(rem, 0, wr.CompareAdd)
		}
		b := local[0]
		for i := 0; i < 8; i++ {
			b[i] = byte(orig >> (8 * i))
		}
	}
}

// canPushLocal reports whether a completion made in this process fits: the
// ring's completions and the local ones together stay within the CQ's size.
func (cq *CQ) canPushLocal() bool {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.mem == nil || cq.nlocal >= len(cq.local) {
		return false
	}
	pending, err := cq.ring.Pending(shm.Load32(cq.mem, abi.RingProdOff), cq.cons)
	return err == nil && pending+cq.nlocal+1 < cq.ring.Entries
}

// pushLocal queues a completion made in this process, marked with the
// ring's producer index: Poll returns it after the ring's completions made
// before it and before those made after. It tells the daemon how many it
// holds (the ring's held word), and wakes a waiter if the CQ is armed.
func (cq *CQ) pushLocal(wc WorkCompletion) {
	cq.mu.Lock()
	i := (cq.hlocal + cq.nlocal) % len(cq.local)
	cq.local[i] = localWC{wc: wc, mark: shm.Load32(cq.mem, abi.RingProdOff)}
	cq.nlocal++
	shm.Store32(cq.mem, abi.RingHeldOff, uint32(cq.nlocal))
	armed := shm.Load32(cq.mem, abi.RingNotifyOff) != 0 && shm.Swap32(cq.mem, abi.RingNotifyOff, 0) != 0
	cq.mu.Unlock()
	if armed {
		cq.notify.Signal()
	}
}
