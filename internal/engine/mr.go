package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

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

	refs  atomic.Int64 // in-flight users; deadBit set once deregistered
	unmap sync.Once
}

const deadBit = int64(1) << 62

// RegisterMR maps region as a memory region of pd at the owner's address addr.
// It takes ownership of region.
func RegisterMR(pd *PD, region *shm.Region, addr, length uint64, access abi.Access) (*MR, error) {
	if access&^abi.AccessAll != 0 {
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
	mr := &MR{pd: pd, addr: addr, length: length, access: access, region: region, mem: region.Bytes()[:length]}
	if err := pd.adapter.addMR(mr); err != nil {
		region.Close()
		return nil, err
	}
	return mr, nil
}

// PD returns the MR's protection domain.
func (m *MR) PD() *PD { return m.pd }

// Info returns the region's owner address, length, key and access.
func (m *MR) Info() (addr, length uint64, key uint32, access abi.Access) {
	return m.addr, m.length, m.key, m.access
}

// Share returns a duplicate of the region's memfd (the caller closes it),
// its owner's address, length and access; it fails once the region is
// deregistered.
func (m *MR) Share() (fd int, addr, length uint64, access abi.Access, err error) {
	if !m.acquire() {
		return -1, 0, 0, 0, fmt.Errorf("region 0x%x was deregistered", m.key)
	}
	defer m.release()
	if m.access&(abi.AccessRemoteWrite|abi.AccessRemoteAtomic) != 0 {
		fd, err = unix.Dup(m.region.FD())
	} else {
		// Read-only for regions remote sides may only read: reopened O_RDONLY,
		// the descriptor cannot be mapped writable.
		fd, err = unix.Open(fmt.Sprintf("/proc/self/fd/%d", m.region.FD()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	return fd, m.addr, m.length, m.access, err
}

// Key returns the MR's lkey, which is also its rkey.
func (m *MR) Key() uint32 { return m.key }

// Deregister removes the MR; its memory is unmapped once the last copy in
// flight is done.
func (m *MR) Deregister() {
	m.pd.adapter.removeMR(m)
	if m.refs.Add(deadBit) == deadBit {
		m.release0()
	}
}

func (m *MR) acquire() bool {
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
