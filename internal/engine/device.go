package engine

// Adapters bound to a device of the host's rdma-core (a verbs uplink,
// docs/design/verbs-uplink-binding.md): the adapter's
// regions are registered with the device, its RC and UD QPs are the
// device's, and
// the send-queue runner forwards the rings' work requests to it; its UD QPs
// and address handles are the device's too (device_ud.go). What a
// peer sees — QPN, rkeys, GIDs, PSNs — is the device's.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/verbs"
)

// Device is what the engine asks of a device: *verbs.Device, or a fake in
// tests.
type Device interface {
	RegMR(fd int, offset, length uint64, access uint32, iova uint64) (verbs.MR, error)
	DeregMR(verbs.MR) error
	CreateCQ(cqe uint32, push bool) (verbs.CQ, error)
	DestroyCQ(verbs.CQ) error
	CreateQP(send, recv verbs.CQ, c verbs.QPCap) (verbs.QP, error)
	ModifyQP(verbs.QP, verbs.QPAttr) error
	DestroyQP(verbs.QP) error
	PostSend(verbs.QP, []verbs.SendWR) error
	PostRecv(verbs.QP, []verbs.RecvWR) error
	CreateUDQP(send, recv verbs.CQ, c verbs.QPCap) (verbs.QP, error)
	ModifyUDQP(qp verbs.QP, state, qkey, sqPSN uint32) error
	PostSendUD(verbs.QP, []verbs.UDSendWR) error
	CreateAH(verbs.AHAttr) (verbs.AH, error)
	DestroyAH(verbs.AH) error
	SetCompletionHandler(func(cq uint32, wcs []verbs.WC))
	SetEventHandler(func(verbs.AsyncEvent))
	SetGoneHandler(func(error))
}

// ErrDeviceQP is what an adapter bound to a device refuses: an object the
// engine cannot yet put on the device (UC and XRC QPs, QPs on an XRC SRQ,
// memory windows, more inline bytes than the helper carries per request).
var ErrDeviceQP = errors.New("not on a verbs uplink yet")

// DeviceUplink is one device port the adapters bound to it share: its
// completions come on one handler, which hands each to the CQ and QP it
// belongs to.
type DeviceUplink struct {
	Name string // the verbs link's name, for messages
	Dev  string // its device's name, for messages (set before use; "" if unknown)
	dev  Device

	mu     sync.Mutex
	gids   [][16]byte
	cqs    map[*CQ]*devCQ     // the device CQ of each engine CQ a device QP uses
	byCQ   map[uint32]*devCQ  // ... by the device's handle
	qps    map[uint32]*QP     // device QPs by QPN
	srqs   map[uint32]*devSRQ // device SRQs by their number in work request IDs (device_srq.go)
	srqID  uint32             // the last number given
	down   error              // why the device went away (device_fault.go); nil while up
	onDown func(error)        // told once when it does
	next   *DeviceUplink      // the link's new device, once it was added again
	// The port's active and largest MTU (ibv_query_port): what a bound
	// adapter's port reports, and the largest path MTU its QPs may take.
	activeMTU, maxMTU abi.MTU
}

// devCQ is an engine CQ's counterpart on the device.
type devCQ struct {
	cq    verbs.CQ
	ecq   *CQ
	users int
}

// NewDeviceUplink makes dev an uplink adapters can be bound to, with the
// port's GID table gids (what ibv_query_gid reports to the instances).
func NewDeviceUplink(name string, dev Device, gids [][16]byte) *DeviceUplink {
	u := &DeviceUplink{Name: name, dev: dev, gids: gids, cqs: map[*CQ]*devCQ{}, byCQ: map[uint32]*devCQ{}, qps: map[uint32]*QP{}}
	dev.SetCompletionHandler(u.complete)
	dev.SetEventHandler(func(e verbs.AsyncEvent) {
		if e.Type == verbs.EventDeviceFatal {
			// Not on the push reader: failing the QPs waits for their
			// runners, which may wait for the helper's reply.
			go u.event(e)
			return
		}
		u.event(e)
	})
	dev.SetGoneHandler(func(err error) { u.DeviceFatal(err) })
	return u
}

// SetGIDs replaces the port's GID table (the netdev's addresses changed).
func (u *DeviceUplink) SetGIDs(gids [][16]byte) {
	u.mu.Lock()
	u.gids = gids
	u.mu.Unlock()
}

// SetMTU records the port's active and largest MTU (enum ibv_mtu values;
// an invalid one is taken as 4096, the engine's own).
func (u *DeviceUplink) SetMTU(active, max abi.MTU) {
	if !active.Valid() {
		active = abi.MTU4096
	}
	if !max.Valid() || max < active {
		max = active
	}
	u.mu.Lock()
	u.activeMTU, u.maxMTU = active, max
	u.mu.Unlock()
}

// MTU returns the port's active and largest MTU (4096 both until SetMTU).
func (u *DeviceUplink) MTU() (active, max abi.MTU) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.activeMTU.Valid() {
		return abi.MTU4096, abi.MTU4096
	}
	return u.activeMTU, u.maxMTU
}

// GIDs returns the port's GID table.
func (u *DeviceUplink) GIDs() [][16]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.gids
}

// Bind makes a's QPs and regions the device's. It must come before a has
// any.
func (a *Adapter) Bind(u *DeviceUplink) error {
	if a.NumQPs() != 0 || a.NumMRs() != 0 {
		return fmt.Errorf("adapter %s already has QPs or regions: bind it to %s before it makes any", a.Name, u.Name)
	}
	a.uplink = u
	return nil
}

// Uplink returns the device uplink a is bound to, nil if none.
func (a *Adapter) Uplink() *DeviceUplink {
	a.devMu.RLock()
	defer a.devMu.RUnlock()
	return a.uplink
}

// useCQ returns the device CQ standing for c, made on first use.
func (u *DeviceUplink) useCQ(c *CQ) (*devCQ, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if d := u.cqs[c]; d != nil {
		d.users++
		return d, nil
	}
	n := c.Ring().Entries
	cq, err := u.dev.CreateCQ(uint32(n), true)
	if err != nil {
		return nil, fmt.Errorf("a CQ of %d entries on %s: %w", n, u.Name, err)
	}
	d := &devCQ{cq: cq, ecq: c, users: 1}
	u.cqs[c], u.byCQ[cq.Handle] = d, d
	return d, nil
}

// unuseCQ drops a use of c's device CQ, destroying it after the last.
func (u *DeviceUplink) unuseCQ(c *CQ) {
	u.mu.Lock()
	d := u.cqs[c]
	if d == nil {
		u.mu.Unlock()
		return
	}
	d.users--
	if d.users > 0 {
		u.mu.Unlock()
		return
	}
	delete(u.cqs, c)
	delete(u.byCQ, d.cq.Handle)
	u.mu.Unlock()
	_ = u.dev.DestroyCQ(d.cq) // the helper may be gone: nothing is left to free then
}

// complete takes the completions the helper pushed for device CQ cq. It
// runs on the push reader: it writes them into the engine's CQ (its
// notification wakes the client as the software path's do) and never calls
// the device.
func (u *DeviceUplink) complete(cq uint32, wcs []verbs.WC) {
	u.mu.Lock()
	d := u.byCQ[cq]
	var ecq *CQ
	if d != nil {
		ecq = d.ecq
	}
	u.mu.Unlock()
	if ecq == nil {
		return // destroyed meanwhile
	}
	for i := range wcs {
		w := &wcs[i]
		if w.WRID&devTagMask == devSRQTag {
			known, ok := u.srqCompleted(w, ecq)
			u.srqQPCompleted(w, known && !ok)
			continue
		}
		u.mu.Lock()
		q := u.qps[w.QPN]
		u.mu.Unlock()
		if q == nil || q.dev == nil {
			continue // destroyed meanwhile, or not the device's
		}
		known, ok := q.dev.completed(w, ecq)
		if known && !ok {
			q.Fail(abi.EventQPFatal, "its completion queue overflowed")
		}
	}
}

// devMR is a region's registration with the device.
type devMR struct {
	u    *DeviceUplink // the device it is registered with
	mr   verbs.MR
	skew uint64 // the region's first byte's offset in the device's registration
}

// registerOnDevice registers m's memory with the adapter's device, over
// the memfd the application shares: the device moves the bytes into and
// out of the application's pages, and knows them by the application's
// addresses (the registration's iova is the address of the page's first
// byte), so a native peer's RDMA WRITE or READ names what the application
// sent it.
func (a *Adapter) registerOnDevice(m *MR) error {
	u, err := a.current()
	if err != nil {
		return err
	}
	base := m.region.Offset() &^ 4095
	skew := m.region.Offset() - base
	if m.addr < skew {
		return fmt.Errorf("registering %d bytes at address %#x with %s: the address lies below its page's offset %#x in the shared memory: register the application's own address", m.length, m.addr, u.Name, skew)
	}
	acc := uint32(m.access & (abi.AccessLocalWrite | abi.AccessRemoteWrite | abi.AccessRemoteRead | abi.AccessRemoteAtomic))
	vm, err := u.dev.RegMR(m.region.FD(), base, skew+m.length, acc, m.addr-skew)
	if err != nil {
		return fmt.Errorf("registering %d bytes with %s: %w", m.length, u.Name, err)
	}
	m.dev = &devMR{u: u, mr: vm, skew: skew}
	a.devMu.Lock()
	if a.devMRs == nil {
		a.devMRs = map[uint32]*MR{}
	}
	a.devMRs[vm.LKey] = m
	a.devMu.Unlock()
	return nil
}

// deregisterOnDevice undoes registerOnDevice.
func (a *Adapter) deregisterOnDevice(m *MR) {
	d := m.dev
	if d == nil {
		return
	}
	a.devMu.Lock()
	if a.devMRs[d.mr.LKey] == m {
		delete(a.devMRs, d.mr.LKey)
	}
	a.devMu.Unlock()
	_ = d.u.dev.DeregMR(d.mr)
}

// deviceMR returns the region the device knows by lkey.
func (a *Adapter) deviceMR(lkey uint32) *MR {
	a.devMu.RLock()
	m := a.devMRs[lkey]
	a.devMu.RUnlock()
	return m
}

// DeviceKeys returns the keys the application and its peers use for m: the
// device's lkey and rkey on a bound adapter, the engine's key otherwise.
func (m *MR) DeviceKeys() (lkey, rkey uint32) {
	if m.dev != nil {
		return m.dev.mr.LKey, m.dev.mr.RKey
	}
	return m.key, m.key
}

// DeviceAddr returns the address a peer names to reach byte 0 of m through
// the device (the application's own: the registration's iova), and whether
// m is on a device.
func (m *MR) DeviceAddr() (uint64, bool) {
	if m.dev == nil {
		return 0, false
	}
	return m.dev.mr.IOVA + m.dev.skew, true
}
