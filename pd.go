package vrdma

import (
	"fmt"

	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
)

// PD is a protection domain: memory regions, queue pairs and address
// handles of different PDs never reach each other.
type PD struct {
	d      *Device
	handle uint32
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (d *Device) AllocPD() (*PD, error) {
	var r proto.HandleResp
	if _, err := d.c.call(proto.OpAllocPD, nil, &r); err != nil {
		return nil, err
	}
	return &PD{d: d, handle: r.Handle}, nil
}

// Dealloc frees the PD; it must have no regions, QPs or address handles left.
func (pd *PD) Dealloc() error {
	return pd.d.release(proto.OpDeallocPD, pd.handle)
}

// Device returns the PD's device.
func (pd *PD) Device() *Device { return pd.d }

// MR is a registered memory region. Its memory is allocated by the
// registration, shared with the daemon and locked in RAM; Bytes gives it to
// the program. After Dereg the slice must not be used.
type MR struct {
	pd     *PD
	handle uint32
	region *shm.Region
	buf    []byte
	lkey   uint32
	rkey   uint32
	access ibv.Access
}

// AllocMR allocates and registers length bytes with the given access flags
// (ibv_reg_mr on memory the registration provides). Lack of RLIMIT_MEMLOCK
// is reported as a *MemlockError that says how to raise it.
func (pd *PD) AllocMR(length int, access ibv.Access) (*MR, error) {
	if length <= 0 {
		return nil, errorf("reg_mr", ErrInvalidArgument, "length %d: a region holds at least one byte", length)
	}
	if access&^abi.AccessAll != 0 {
		return nil, errorf("reg_mr", ErrInvalidArgument, "unknown access flags %v", access)
	}
	if access&(ibv.AccessRemoteWrite|ibv.AccessRemoteAtomic) != 0 && access&ibv.AccessLocalWrite == 0 {
		return nil, errorf("reg_mr", ErrInvalidArgument, "access %v: REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE too", access)
	}
	region, err := shm.NewRegion("vrdma-mr", length)
	if err != nil {
		return nil, &Error{Op: "reg_mr", Kind: ErrLimit, Err: err}
	}
	if err := region.Lock(); err != nil {
		region.Close()
		return nil, &Error{Op: "reg_mr", Kind: ErrMemlock, Err: err}
	}
	buf := region.Bytes()
	var r proto.RegMRResp
	req := proto.RegMRReq{PD: pd.handle, Addr: shm.Addr(buf), Length: uint64(length), Access: uint32(access)}
	if _, err := pd.d.c.call(proto.OpRegMR, req, &r, region.FD()); err != nil {
		region.Close()
		return nil, err
	}
	mr := &MR{pd: pd, handle: r.Handle, region: region, buf: buf, lkey: r.LKey, rkey: r.RKey, access: access}
	pd.d.mu.Lock()
	if pd.d.mrs == nil {
		pd.d.mrs = map[uint32]*MR{}
	}
	pd.d.mrs[mr.lkey] = mr
	pd.d.mu.Unlock()
	return mr, nil
}

// Bytes returns the region's memory.
func (m *MR) Bytes() []byte { return m.buf }

// Addr returns the region's virtual address, the base of its SGE addresses
// and of the remote addresses peers use with its rkey.
func (m *MR) Addr() uint64 { return shm.Addr(m.buf) }

// Len returns the region's length in bytes.
func (m *MR) Len() int { return len(m.buf) }

// LKey and RKey return the region's keys.
func (m *MR) LKey() uint32 { return m.lkey }
func (m *MR) RKey() uint32 { return m.rkey }

// Access returns the region's access flags.
func (m *MR) Access() ibv.Access { return m.access }

// SGE returns the scatter/gather element for n bytes at offset off.
func (m *MR) SGE(off, n int) ibv.SGE {
	return ibv.SGE{Addr: m.Addr() + uint64(off), Length: uint32(n), LKey: m.lkey}
}

// RemoteMR is what a peer needs to reach a region: address, key, length.
type RemoteMR struct {
	Addr uint64
	RKey uint32
	Len  uint64
}

// Remote describes the region for a peer.
func (m *MR) Remote() RemoteMR {
	return RemoteMR{Addr: m.Addr(), RKey: m.rkey, Len: uint64(len(m.buf))}
}

// Dereg deregisters the region and unmaps its memory (ibv_dereg_mr).
func (m *MR) Dereg() error {
	if m.region == nil {
		return errorf("dereg_mr", ErrClosed, "region already deregistered")
	}
	err := m.pd.d.release(proto.OpDeregMR, m.handle)
	m.pd.d.mu.Lock()
	delete(m.pd.d.mrs, m.lkey)
	m.pd.d.mu.Unlock()
	m.region.Close()
	m.region, m.buf = nil, nil
	return err
}

// inlineSource returns the bytes an SGE names in one of this device's
// regions, for inline sends that gather from registered memory.
func (d *Device) inlineSource(s ibv.SGE) ([]byte, error) {
	d.mu.Lock()
	m := d.mrs[s.LKey]
	d.mu.Unlock()
	if m == nil || s.Addr < m.Addr() || s.Addr-m.Addr()+uint64(s.Length) > uint64(len(m.buf)) {
		return nil, fmt.Errorf("inline SGE {addr 0x%x len %d lkey 0x%x} is not inside a region of this device: %w", s.Addr, s.Length, s.LKey, ErrInvalidArgument)
	}
	off := s.Addr - m.Addr()
	return m.buf[off : off+uint64(s.Length)], nil
}

// AH is an address handle for UD sends (ibv_ah).
type AH struct {
	pd     *PD
	handle uint32
	attr   ibv.AHAttr
}

// CreateAH creates an address handle (ibv_create_ah).
func (pd *PD) CreateAH(attr ibv.AHAttr) (*AH, error) {
	var r proto.HandleResp
	if _, err := pd.d.c.call(proto.OpCreateAH, proto.CreateAHReq{PD: pd.handle, AV: attr}, &r); err != nil {
		return nil, err
	}
	return &AH{pd: pd, handle: r.Handle, attr: attr}, nil
}

// Attr returns the address vector.
func (ah *AH) Attr() ibv.AHAttr { return ah.attr }

// Destroy frees the address handle.
func (ah *AH) Destroy() error {
	return ah.pd.d.release(proto.OpDestroyAH, ah.handle)
}
