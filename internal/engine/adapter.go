package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/verbs"
)

// Device limits every adapter advertises. The queue limits are those of
// real devices (a ConnectX's max_cqe and max_qp_wr, rdma_rxe's max_sge),
// so that programs sized for them (libfabric's RDM endpoint asks for a
// CQ of 262,144) run unchanged; every queue's memory is charged to its
// tenant's ring limit before it is made (footprint.go), which is what
// bounds how many such queues a tenant holds.
const (
	MaxQP       = 1 << 14
	MaxQPWR     = 1 << 15 // 32,768 requests: 32 MiB of ring with the largest entries
	MaxCQE      = 1 << 22 // 4,194,304 completions: a ring of 128 MiB
	MaxMR       = 1 << 16
	MaxSGE      = abi.MaxSGE
	MaxInline   = abi.MaxInline // 960 bytes: the body of a 1 KiB entry
	MaxRdAtomic = 128
	MaxMRSize   = 1 << 40
	PKeyTable   = 1
	GIDTable    = 16 // entries of a port's GID table: the host's first 16 GIDs
	DefaultPKey = 0xFFFF
	firstQPN    = 0x11 // QPN 0 and 1 are the special QPs, as on every RoCE device
)

// Adapter is one vrdma device: its GIDs, its QPN and key spaces, its tables.
type Adapter struct {
	Name       string
	Instance   string
	Index      int
	GUID       uint64
	MAC        [6]byte
	own        [][16]byte // the adapter's own GID table, used while the host has no link
	Async      bool
	TrustGroup string // adapters of instances with the same non-empty group trust each other
	ActiveMTU  abi.MTU
	// NativeEndpoint: the adapter's QPs take packets from addresses outside
	// the switch (members.go); set before the adapter is added to a host.
	NativeEndpoint bool

	Counters Counters

	lid atomic.Uint32 // the port's LID (SetLID); 0: none yet

	host *Host

	mrs mrTable // the live regions by key (mrtable.go)

	qpMu    sync.RWMutex
	qps     map[uint32]*QP
	nextQPN uint32

	xsrqs xrcTable // XRC SRQs by number (xrc.go)

	poller *poller

	// A verbs uplink the adapter is bound to (device.go), and its regions
	// by the device's lkey.
	uplink *DeviceUplink
	devMu  sync.RWMutex
	devMRs map[uint32]*MR
	devQPs int // QPs on the device, under devMu (device_fault.go)
}

// NewAdapter creates an adapter. gids[0] is the link-local GID.
func NewAdapter(instance, name string, index int, mac [6]byte, async bool) *Adapter {
	a := &Adapter{
		Name: name, Instance: instance, Index: index, MAC: mac, Async: async,
		ActiveMTU: abi.MTU4096,
		qps:       make(map[uint32]*QP),
		nextQPN:   firstQPN,
	}
	a.GUID = eui64(mac)
	a.own = [][16]byte{LinkLocalGID(mac)}
	a.mrs.init()
	return a
}

// GIDs returns the adapter's GID table. While the host has links, it is
// theirs (the links' GIDs in rxe's order), shared by every adapter of the
// host: the adapters are native endpoints on the host's addresses, told
// apart by QPN. Without links it is the adapter's own link-local GID.
func (a *Adapter) GIDs() [][16]byte {
	if u := a.Uplink(); u != nil {
		return u.GIDs() // the device's: what its QPs send from
	}
	if h := a.host; h != nil {
		if g := h.linkGIDs.Load(); g != nil && len(*g) > 0 {
			return *g
		}
	}
	return a.own
}

// LID returns the port's LID, 0 while it has none. The engine does not
// route by it: the daemon resolves LIDs to GIDs before they reach a QP.
func (a *Adapter) LID() uint16 { return uint16(a.lid.Load()) }

// SetLID gives the port its LID (the switch's subnet manager assigns it,
// or the daemon on a host without a switch).
func (a *Adapter) SetLID(lid uint16) { a.lid.Store(uint32(lid)) }

// PortMTU returns the adapter's active MTU: the smallest of its links'
// (an interface MTU of 1500 gives 1024, as rxe computes it), or ActiveMTU
// on a host without links; a bound adapter's is its device port's.
func (a *Adapter) PortMTU() abi.MTU {
	m := a.ActiveMTU
	if u := a.uplink; u != nil {
		active, _ := u.MTU()
		return min(m, active)
	}
	if a.host != nil {
		for _, l := range a.host.Links() {
			if lm := l.ActiveMTU(); lm.Valid() && lm < m {
				m = lm
			}
		}
	}
	return m
}

// PortMaxMTU returns the largest MTU the adapter's port supports: 4096,
// or a bound adapter's device port's.
func (a *Adapter) PortMaxMTU() abi.MTU {
	if u := a.uplink; u != nil {
		_, max := u.MTU()
		return max
	}
	return abi.MTU4096
}

// OwnsGID reports whether gid is in the adapter's GID table.
func (a *Adapter) OwnsGID(gid [16]byte) bool {
	for _, g := range a.GIDs() {
		if g == gid {
			return true
		}
	}
	return false
}

// Close releases the adapter. Its objects must be gone already.
func (a *Adapter) Close() {}

func eui64(mac [6]byte) uint64 {
	b := [8]byte{mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]}
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

// LinkLocalGID is fe80::/64 with the EUI-64 of mac, as RoCE devices derive
// GID 0 from their interface's MAC.
func LinkLocalGID(mac [6]byte) [16]byte {
	g := [16]byte{0: 0xfe, 1: 0x80}
	g[8], g[9], g[10], g[11] = mac[0]^0x02, mac[1], mac[2], 0xff
	g[12], g[13], g[14], g[15] = 0xfe, mac[3], mac[4], mac[5]
	return g
}

// Trusts reports whether a and b trust each other: the adapters of one
// instance do, and so do those of instances in the same trust group.
// Between trusting adapters an initiator may be given a mapping of the
// target's regions and do one-sided operations itself. An adapter of no
// instance (Instance "": the daemon's default instance, which every user
// of its socket shares, whoever they are) trusts nobody, not even itself.
func (a *Adapter) Trusts(b *Adapter) bool {
	if a.Instance == "" || b.Instance == "" {
		return false
	}
	return a.Instance == b.Instance || (a.TrustGroup != "" && a.TrustGroup == b.TrustGroup)
}

// QP returns the live QP with number qpn, or nil.
func (a *Adapter) QP(qpn uint32) *QP {
	a.qpMu.RLock()
	q := a.qps[qpn]
	a.qpMu.RUnlock()
	return q
}

// QPs returns a snapshot of the adapter's QPs.
func (a *Adapter) QPs() []*QP {
	a.qpMu.RLock()
	defer a.qpMu.RUnlock()
	out := make([]*QP, 0, len(a.qps))
	for _, q := range a.qps {
		out = append(out, q)
	}
	return out
}

func (a *Adapter) addQP(q *QP) error {
	a.qpMu.Lock()
	defer a.qpMu.Unlock()
	if len(a.qps) >= MaxQP {
		return fmt.Errorf("adapter %s has %d QPs, its limit: destroy unused QPs", a.Name, MaxQP)
	}
	if q.dev != nil {
		// The device numbered it; the host's table is the software
		// path's, which never reaches it.
		if _, used := a.qps[q.qpn]; used {
			return fmt.Errorf("adapter %s: the device's QPN %#x is taken", a.Name, q.qpn)
		}
		a.qps[q.qpn] = q
		q.dev.u.mu.Lock()
		q.dev.u.qps[q.qpn] = q
		q.dev.u.mu.Unlock()
	} else if a.host != nil {
		// QPNs are unique on the host: adapters share the links' addresses
		// and packets find their QP by number.
		q.qpn = a.host.addQP(q)
		a.qps[q.qpn] = q
	} else {
		for {
			n := a.nextQPN
			a.nextQPN++
			if a.nextQPN > 0xFFFFFF {
				a.nextQPN = firstQPN
			}
			if _, used := a.qps[n]; !used {
				q.qpn = n
				a.qps[n] = q
				break
			}
		}
	}
	if a.poller != nil {
		a.poller.add(q)
	}
	return nil
}

func (a *Adapter) removeQP(q *QP) {
	a.qpMu.Lock()
	if a.qps[q.qpn] == q {
		delete(a.qps, q.qpn)
	}
	a.qpMu.Unlock()
	if a.host != nil && q.dev == nil {
		a.host.removeQP(q)
	}
	if a.poller != nil {
		a.poller.remove(q)
	}
}

// NumQPs returns the count of live QPs.
func (a *Adapter) NumQPs() int {
	a.qpMu.RLock()
	defer a.qpMu.RUnlock()
	return len(a.qps)
}

// addMR assigns mr a key and publishes it.
func (a *Adapter) addMR(mr *MR) error { return a.mrs.add(mr, a.Name) }

func (a *Adapter) removeMR(mr *MR) { a.mrs.remove(mr) }

// lookupMR returns the live region with this exact key, or nil: a memory
// window's rkey is no lkey.
func (a *Adapter) lookupMR(key uint32) *MR {
	m := a.mrs.lookup(key)
	if m == nil || m.window != nil {
		return nil
	}
	return m
}

// lookupRKey returns the live region or memory window with this exact
// rkey, or nil.
func (a *Adapter) lookupRKey(key uint32) *MR { return a.mrs.lookup(key) }

// NumMRs returns the count of live MRs.
func (a *Adapter) NumMRs() int { return a.mrs.count() }

// PD is a protection domain: objects of different PDs never reach each other.
type PD struct {
	id      uint64
	adapter *Adapter
	// The device's address handles of a bound adapter's PD, by the
	// instance's handles (device_ud.go).
	ahMu   sync.Mutex
	devAHs map[uint32]verbs.AH
}

// NewPD allocates a protection domain on a.
func (a *Adapter) NewPD() *PD {
	var id uint64 = 1
	if a.host != nil {
		id = a.host.pdSeq.Add(1)
	}
	return &PD{id: id, adapter: a}
}

// Adapter returns the PD's adapter.
func (p *PD) Adapter() *Adapter { return p.adapter }
