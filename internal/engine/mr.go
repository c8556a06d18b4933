package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// MR is a registered memory region mapped into the daemon. Work requests
// hold a reference while they copy, so deregistration never unmaps memory
// under a copy in flight.
type MR struct {
	pd     *PD
	key    uint32
	addr   uint64 // the owner's virtual address of byte 0
	length uint64
	access abi.Access
	region *shm.Region
	mem    []byte
	mapped uint64 // bytes of the memfd mapped for it (region.Mapped)
	dev    *devMR // its registration with the device of a bound adapter (device.go)

	// A memory window's entry (mw.go): window is the window; a bound
	// one borrows parent's memory (mem is part of parent's) and, for a
	// type 2 window, is bound through qp only.
	window *MW
	parent *MR
	qp     *QP
	// unbound is what a bound type 2 window's entry becomes when it is
	// invalidated, made at the bind so that invalidating (a SEND with
	// Invalidate on the data path) allocates nothing; nil otherwise.
	unbound *MR

	refs  atomic.Int64 // in-flight users; deadBit set once deregistered
	unmap sync.Once

	// The initiator QPs the region was handed to for the direct path
	// (ShareWith); Deregister revokes their mappings. gone is set once
	// Deregister has taken the list: no QP is added after that.
	mapMu   sync.Mutex
	mappers map[*QP]struct{}
	gone    bool
}

// RevokeWait bounds how long a deregistration waits for a direct-path
// operation of an initiator to finish. A trusted initiator's operation
// takes microseconds (the library runs only requests up to a few MiB
// itself); one still running after this is stuck or hostile, and its QP is
// failed instead of holding the region's owner up for ever.
var RevokeWait = time.Second

const deadBit = int64(1) << 62

// RegisterMR maps region as a memory region of pd at the owner's address
// addr: the region's first length bytes (shm.MapRegionRange maps a region
// that starts inside a memfd). It takes ownership of region.
func RegisterMR(pd *PD, region *shm.Region, addr, length uint64, access abi.Access) (*MR, error) {
	mr, err := newMR(pd, region, addr, length, access)
	if err != nil {
		return nil, err
	}
	if pd.adapter.Uplink() != nil {
		if err := pd.adapter.registerOnDevice(mr); err != nil {
			region.Close()
			return nil, err
		}
	}
	if err := pd.adapter.addMR(mr); err != nil {
		pd.adapter.deregisterOnDevice(mr)
		region.Close()
		return nil, err
	}
	return mr, nil
}

// newMR checks a registration and makes its MR, without a key; it takes
// ownership of region (closed on error).
func newMR(pd *PD, region *shm.Region, addr, length uint64, access abi.Access) (*MR, error) {
	if access&^(abi.AccessAll|abi.AccessOnDemand) != 0 {
		region.Close()
		return nil, fmt.Errorf("unknown access flags %v", access)
	}
	// IBTA: remote write or remote atomic access requires local write.
	if access&(abi.AccessRemoteWrite|abi.AccessRemoteAtomic) != 0 && access&abi.AccessLocalWrite == 0 {
		region.Close()
		return nil, fmt.Errorf("access %v: REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE too (IBTA 10.6.3.1)", access)
	}
	if length == 0 || length > uint64(len(region.Bytes())) || length > MaxMRSize {
		region.Close()
		return nil, fmt.Errorf("length %d does not fit the %d-byte memory passed", length, len(region.Bytes()))
	}
	if addr+length < addr {
		region.Close()
		return nil, fmt.Errorf("address 0x%x + length %d wraps around", addr, length)
	}
	return &MR{pd: pd, addr: addr, length: length, access: access, region: region, mem: region.Bytes()[:length],
		mapped: uint64(region.Mapped())}, nil
}

// Reregister makes a region as RegisterMR does and puts it in m's place
// under m's key (ibv_rereg_mr keeps the keys): a lookup finds m or the new
// region, never neither. m is then retired as Deregister does (direct-path
// mappings revoked, unmapped once the copies in flight are done) and must
// not be used again. On error m stays as it was; region is closed.
func (m *MR) Reregister(pd *PD, region *shm.Region, addr, length uint64, access abi.Access) (*MR, error) {
	if pd.adapter != m.pd.adapter {
		region.Close()
		return nil, fmt.Errorf("the protection domain is another adapter's")
	}
	if m.dev != nil {
		region.Close()
		return nil, fmt.Errorf("re-registering a region of an adapter on verbs uplink %s: %w", pd.adapter.Uplink().Name, ErrDeviceQP)
	}
	n, err := newMR(pd, region, addr, length, access)
	if err != nil {
		return nil, err
	}
	n.key = m.key
	if !pd.adapter.mrs.replace(m, n) {
		region.Close()
		return nil, fmt.Errorf("region 0x%x was deregistered", m.key)
	}
	m.retire()
	return n, nil
}

// PD returns the MR's protection domain.
func (m *MR) PD() *PD { return m.pd }

// Info returns the region's owner address, length, key and access.
func (m *MR) Info() (addr, length uint64, key uint32, access abi.Access) {
	return m.addr, m.length, m.key, m.access
}

// Shared is a region as ShareWith hands it to a direct-path initiator: the
// region is bytes [Offset, Offset+Length) of the memfd FD, at its owner's
// address Addr.
type Shared struct {
	FD     int // a duplicate, the caller's to close; read-only unless remote sides may write
	Offset uint64
	Addr   uint64
	Length uint64
	Access abi.Access
}

// ShareWith returns the region for the direct path of initiator q; it fails
// once the region is deregistered. q's mappings are revoked when the region
// is deregistered (Deregister).
func (m *MR) ShareWith(q *QP) (Shared, error) {
	if !m.acquire() {
		return Shared{FD: -1}, fmt.Errorf("region 0x%x was deregistered", m.key)
	}
	defer m.release()
	if n := m.region.Segments(); n > 1 {
		// One descriptor and offset cannot describe it: the daemon's path
		// serves it.
		return Shared{FD: -1}, fmt.Errorf("region 0x%x is mapped from %d memfds: the direct path maps regions of one", m.key, n)
	}
	m.mapMu.Lock()
	if m.gone {
		m.mapMu.Unlock()
		return Shared{FD: -1}, fmt.Errorf("region 0x%x was deregistered", m.key)
	}
	if m.mappers == nil {
		m.mappers = make(map[*QP]struct{})
	}
	for p := range m.mappers { // QPs destroyed since they mapped it
		if p.released() {
			delete(m.mappers, p)
		}
	}
	m.mappers[q] = struct{}{}
	m.mapMu.Unlock()
	var fd int
	var err error
	if m.access&(abi.AccessRemoteWrite|abi.AccessRemoteAtomic) != 0 {
		fd, err = unix.Dup(m.region.FD())
	} else {
		// Read-only for regions remote sides may only read: reopened O_RDONLY,
		// the descriptor cannot be mapped writable.
		fd, err = unix.Open(fmt.Sprintf("/proc/self/fd/%d", m.region.FD()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return Shared{FD: -1}, fmt.Errorf("region 0x%x: share its memfd: %w", m.key, err)
	}
	return Shared{FD: fd, Offset: m.region.Offset(), Addr: m.addr, Length: m.length, Access: m.access}, nil
}

// Mapped returns how many bytes the daemon maps and locks for the region:
// its length, and the part of its first page before it when it starts
// inside a page of its memfd (shm.Region.Mapped).
func (m *MR) Mapped() uint64 { return m.mapped }

// Key returns the MR's lkey, which is also its rkey.
func (m *MR) Key() uint32 { return m.key }

// Deregister removes the MR; its memory is unmapped once the last copy in
// flight is done. When it returns, no direct-path operation of an
// initiator the region was shared with runs on it or will (RevokeDirect):
// the owner may reuse the memory. An initiator that does not finish in
// RevokeWait is failed with QP_FATAL.
func (m *MR) Deregister() {
	m.pd.adapter.removeMR(m)
	m.pd.adapter.deregisterOnDevice(m)
	m.retire()
}

// retire revokes m's direct-path mappings and unmaps it once the copies in
// flight are done; m is out of the key table already.
func (m *MR) retire() {
	m.mapMu.Lock()
	m.gone = true
	mappers := m.mappers
	m.mappers = nil
	m.mapMu.Unlock()
	for q := range mappers {
		if !q.RevokeDirect(RevokeWait) {
			q.Fail(abi.EventQPFatal, fmt.Sprintf("a direct-path operation was still running %v after the peer deregistered region 0x%x: the QP is failed so that the region's owner can reuse its memory", RevokeWait, m.key))
		}
	}
	if m.refs.Add(deadBit) == deadBit {
		m.release0()
	}
}

func (m *MR) acquire() bool {
	if m.window != nil {
		// A window pins the region it borrows from; unbound, it has none.
		return m.parent != nil && m.parent.acquire()
	}
	for {
		v := m.refs.Load()
		if v&deadBit != 0 {
			return false
		}
		if m.refs.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

func (m *MR) release() {
	if m.window != nil {
		m.parent.release()
		return
	}
	if m.refs.Add(-1) == deadBit {
		m.release0()
	}
}

func (m *MR) release0() {
	m.unmap.Do(func() { m.region.Close() })
}

// span returns the bytes [addr, addr+n) of the region, or nil if they are
// not all inside it.
func (m *MR) span(addr uint64, n uint32) []byte {
	if addr < m.addr {
		return nil
	}
	off := addr - m.addr
	if off > m.length || uint64(n) > m.length-off {
		return nil
	}
	return m.mem[off : off+uint64(n)]
}
