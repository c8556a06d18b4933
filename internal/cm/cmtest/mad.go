// Package cmtest is a hand-made connection manager peer for tests: another
// host's CM that sends the CM MADs a test writes, so that a test can play
// Linux rdma_cm, or a peer that breaks the rules.
package cmtest

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fakelink"
	"github.com/vrdma/vrdma/internal/ibcm"
)

// Wait turns a hang into a failure; nothing depends on it.
const Wait = 5 * time.Second

// MADPeer is a hand-made connection manager on another host: QP1 of an
// engine host with one link on a fake network, which sends the CM MADs a
// test writes (as Linux rdma_cm does, or breaking its rules) and keeps the
// REJs that come back.
//
//	p := cmtest.NewMADPeer(t, net, netip.MustParseAddr("10.0.0.2"))
//	p.SendREQ(dst, 7000, 1, nil)
//	p.ExpectREJ(1, ibcm.RejectInvalidServiceID)
type MADPeer struct {
	T   testing.TB
	GID [16]byte // the link's address, IPv4-mapped
	h   *engine.Host

	mu      sync.Mutex
	rejs    []ibcm.REJ
	arrived chan struct{}
}

// NewMADPeer puts a peer with address addr on n, until the test ends.
func NewMADPeer(t testing.TB, n *fakelink.Network, addr netip.Addr) *MADPeer {
	t.Helper()
	l := n.Link("rxe0", [6]byte{0x52, 0x54, 0, 0xcc, addr.As16()[14], addr.As16()[15]}, addr)
	p := &MADPeer{T: t, GID: addr.As16(), h: engine.NewHost(), arrived: make(chan struct{}, 1)}
	if err := p.h.AddLink(l); err != nil {
		t.Fatal(err)
	}
	p.h.SetGSIHandler(p.onMAD)
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Serve(func(f []byte) { p.h.Deliver(l, f) }) }()
	t.Cleanup(func() {
		p.h.SetGSIHandler(nil)
		l.Close()
		<-done
		p.h.Close()
	})
	return p
}

// onMAD keeps the REJs that arrive.
func (p *MADPeer) onMAD(d *engine.GSIDatagram) {
	h, data, err := ibcm.ParseMAD(d.MAD)
	if err != nil || h.Attr != ibcm.AttrREJ {
		return
	}
	r, err := ibcm.ParseREJ(data)
	if err != nil {
		return
	}
	r.PrivateData = slices.Clone(r.PrivateData)
	p.mu.Lock()
	p.rejs = append(p.rejs, r)
	p.mu.Unlock()
	select {
	case p.arrived <- struct{}{}:
	default:
	}
}

// Send sends a MAD to dst's QP1.
func (p *MADPeer) Send(dst [16]byte, mad []byte) {
	p.T.Helper()
	if err := p.h.SendGSI(p.GID, dst, engine.GSIQPN, mad); err != nil {
		p.T.Fatal(err)
	}
}

// REQ is the REQ that Linux rdma_cm sends from p for its connection id to
// port of dst, with consumer's private data after the IP CM header.
func (p *MADPeer) REQ(dst [16]byte, port uint16, id uint32, consumer []byte) ibcm.REQ {
	p.T.Helper()
	pd, err := ibcm.AppendIPHeader(nil, ibcm.IPHeader{SrcPort: 40000, Src: netip.AddrFrom16(p.GID).Unmap(), Dst: netip.AddrFrom16(dst).Unmap()})
	if err != nil {
		p.T.Fatal(err)
	}
	return ibcm.REQ{LocalCommID: id, ServiceID: ibcm.ServiceID(ibcm.PortSpaceTCP, port), LocalCAGUID: 0x505400fffecc0001,
		LocalQPN: 0x77, ResponderResources: 4, InitiatorDepth: 4, RemoteCMResponseTimeout: 20, StartingPSN: 0x1234,
		LocalCMResponseTimeout: 20, RetryCount: 7, PKey: 0xffff, PathMTU: 3, RNRRetryCount: 7, MaxCMRetries: 15,
		Primary:     ibcm.Path{LocalLID: 0xffff, RemoteLID: 0xffff, LocalGID: p.GID, RemoteGID: dst, HopLimit: 64, LocalACKTimeout: 0x13},
		PrivateData: append(pd, consumer...)}
}

// SendREQ sends r (see REQ) to its primary path's remote GID.
func (p *MADPeer) SendREQ(r ibcm.REQ) {
	p.T.Helper()
	b, err := r.Append(ibcm.AppendHeader(nil, ibcm.CMHeader(ibcm.AttrREQ, uint64(r.LocalCommID)<<8)))
	if err != nil {
		p.T.Fatal(err)
	}
	p.Send(r.Primary.RemoteGID, b)
}

// SendREJ sends dst a REJ of p's connection id (the requester gives up:
// the responder's id is not known).
func (p *MADPeer) SendREJ(dst [16]byte, id uint32, reason uint16) {
	p.T.Helper()
	r := ibcm.REJ{LocalCommID: id, Reason: reason, MessageRejected: ibcm.MsgOther}
	b, err := r.Append(ibcm.AppendHeader(nil, ibcm.CMHeader(ibcm.AttrREJ, uint64(id)<<8)))
	if err != nil {
		p.T.Fatal(err)
	}
	p.Send(dst, b)
}

// REJs returns the REJs that arrived so far.
func (p *MADPeer) REJs() []ibcm.REJ {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.rejs)
}

// ExpectREJ waits for a REJ of p's connection id and checks its reason.
func (p *MADPeer) ExpectREJ(id uint32, reason uint16) ibcm.REJ {
	p.T.Helper()
	deadline := time.After(Wait)
	for {
		for _, r := range p.REJs() {
			if r.RemoteCommID != id {
				continue
			}
			if r.Reason != reason {
				p.T.Fatalf("REJ %+v of %#x, want reason %d", r, id, reason)
			}
			return r
		}
		select {
		case <-p.arrived:
		case <-deadline:
			p.T.Fatalf("no REJ of %#x (reason %d) within %v", id, reason, Wait)
		}
	}
}
