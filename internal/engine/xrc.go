package engine

// XRC (eXtended Reliable Connected transport, IBTA annex A14): domains,
// XRC SRQs numbered on their adapter, and the two QP roles. An initiator
// (XRC_SEND) is an RC requester whose every request names the XRC SRQ it
// is for; a target (XRC_RECV) is an RC responder with no queues of its
// own, which receives into the SRQ a request names if that SRQ is of the
// target's domain (else it answers NAK invalid request). docs/design/xrc.md.

import (
	"errors"
	"fmt"
	"sync"
)

// XRCD is an XRC domain of one adapter. The daemon decides who shares one
// (processes that open it with the same file); the engine counts what is
// in it.
type XRCD struct {
	adapter *Adapter

	mu    sync.Mutex
	users int // XRC SRQs and target QPs in the domain
}

// NewXRCD creates an empty XRC domain on a.
func NewXRCD(a *Adapter) *XRCD { return &XRCD{adapter: a} }

// Adapter returns the domain's adapter.
func (x *XRCD) Adapter() *Adapter { return x.adapter }

// Busy reports whether XRC SRQs or target QPs are in the domain.
func (x *XRCD) Busy() bool { x.mu.Lock(); defer x.mu.Unlock(); return x.users > 0 }

func (x *XRCD) use()   { x.mu.Lock(); x.users++; x.mu.Unlock() }
func (x *XRCD) unuse() { x.mu.Lock(); x.users--; x.mu.Unlock() }

// xrcRole is what a QP is in XRC.
type xrcRole uint8

const (
	xrcNone xrcRole = iota
	xrcINI          // XRC_SEND
	xrcTGT          // XRC_RECV
)

// ErrXRCSRQs is returned when an adapter has every XRC SRQ number in use.
var ErrXRCSRQs = errors.New("engine: no XRC SRQ number is free on the adapter")

// maxSRQN bounds SRQ numbers: the XRCETH holds 24 bits.
const maxSRQN = 1<<24 - 1

// xrcTable numbers an adapter's XRC SRQs.
type xrcTable struct {
	mu   sync.RWMutex
	srqs map[uint32]*RQ
	next uint32
}

func (t *xrcTable) add(r *RQ) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srqs == nil {
		t.srqs = make(map[uint32]*RQ)
	}
	if len(t.srqs) >= maxSRQN {
		return ErrXRCSRQs
	}
	for {
		t.next++
		if t.next > maxSRQN {
			t.next = 1
		}
		if _, used := t.srqs[t.next]; !used {
			r.num = t.next
			t.srqs[t.next] = r
			return nil
		}
	}
}

func (t *xrcTable) remove(r *RQ) {
	t.mu.Lock()
	if t.srqs[r.num] == r {
		delete(t.srqs, r.num)
	}
	t.mu.Unlock()
}

func (t *xrcTable) lookup(n uint32) *RQ {
	t.mu.RLock()
	r := t.srqs[n]
	t.mu.RUnlock()
	return r
}

// NewXRCSRQ creates an XRC SRQ of domain x: its receives are taken by
// requests to target QPs of x naming its number, and complete on cq; its
// buffers are of pd.
func NewXRCSRQ(pd *PD, x *XRCD, cq *CQ, maxWR, maxSGE int) (*RQ, error) {
	if x == nil || cq == nil {
		return nil, fmt.Errorf("an XRC SRQ needs an XRC domain and a completion queue")
	}
	if x.adapter != pd.adapter {
		return nil, fmt.Errorf("the XRC domain and the protection domain are of different adapters")
	}
	r, err := NewSRQ(pd, maxWR, maxSGE)
	if err != nil {
		return nil, err
	}
	r.xrcd, r.cq = x, cq
	if err := pd.adapter.xsrqs.add(r); err != nil {
		r.Close()
		return nil, err
	}
	x.use()
	cq.Use()
	return r, nil
}

// SRQNum returns an XRC SRQ's number (ibv_get_srq_num); 0 for other SRQs.
func (r *RQ) SRQNum() uint32 { return r.num }

// XRCD returns an XRC SRQ's domain; nil for other SRQs.
func (r *RQ) XRCD() *XRCD { return r.xrcd }

// closeXRC takes an XRC SRQ out of its adapter's table and its domain.
func (r *RQ) closeXRC() {
	if r.xrcd == nil {
		return
	}
	r.pd.adapter.xsrqs.remove(r)
	r.xrcd.unuse()
	r.cq.Unuse()
	r.xrcd = nil
}

// xrcTarget returns the XRC SRQ numbered n if q is a target QP and the SRQ
// is of q's domain: what a request to q naming n is received into.
func (q *QP) xrcTarget(n uint32) *RQ {
	if q.xrc != xrcTGT {
		return nil
	}
	r := q.adapter.xsrqs.lookup(n)
	if r == nil || r.xrcd != q.xrcd {
		return nil
	}
	return r
}

// XRCD returns a target QP's domain; nil for other QPs.
func (q *QP) XRCD() *XRCD { return q.xrcd }

// QPByNumber returns the adapter's QP numbered qpn, or nil.
func (a *Adapter) QPByNumber(qpn uint32) *QP {
	a.qpMu.RLock()
	defer a.qpMu.RUnlock()
	return a.qps[qpn]
}
