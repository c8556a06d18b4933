package interop

import (
	"bytes"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/uplink"
)

// TestCMRejectFromRxe sends the guest kernel's CM, over rdma_rxe, a REQ
// for a TCP port nobody listens on, from QP1 of an engine on a link in the
// host namespace, and takes the kernel's REJ ("invalid service ID") on
// QP1: the MADs vrdma builds are what Linux's ib_cm reads, and what it
// answers arrives and decodes (issue 12's QP1 and codec, against the real
// peer).
func TestCMRejectFromRxe(t *testing.T) {
	g := sharedGuests(t)
	host := g.Host(t)
	var l *uplink.Link
	if err := host.Do(func() error {
		var err error
		l, err = uplink.Open(uplink.Config{Name: "rxe0", Netdev: HostIface})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h := engine.NewHost()
	if err := h.AddLink(l); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 16)
	h.SetGSIHandler(func(d *engine.GSIDatagram) {
		select {
		case got <- bytes.Clone(d.MAD):
		default:
		}
	})
	served := make(chan struct{})
	go func() { defer close(served); _ = l.Serve(func(f []byte) { h.Deliver(l, f) }) }()
	t.Cleanup(func() { l.Close(); <-served })

	ours, theirs := HostIP.As16(), GuestIP("A").As16() // IPv4-mapped GIDs
	const commID, tid = 0x0bad1dea, 0x1234abcd
	priv, err := ibcm.AppendIPHeader(nil, ibcm.IPHeader{SrcPort: 40001, Src: HostIP, Dst: GuestIP("A")})
	if err != nil {
		t.Fatal(err)
	}
	req := ibcm.REQ{
		LocalCommID: commID, ServiceID: ibcm.ServiceID(ibcm.PortSpaceTCP, 7999), LocalCAGUID: 0x0200000000000001,
		LocalQPN: 0x77, ResponderResources: 1, InitiatorDepth: 1, RemoteCMResponseTimeout: 20, StartingPSN: 1,
		LocalCMResponseTimeout: 20, RetryCount: 7, PKey: 0xffff, PathMTU: 3, RNRRetryCount: 7, MaxCMRetries: 15,
		Primary:     ibcm.Path{LocalLID: 0xffff, RemoteLID: 0xffff, LocalGID: ours, RemoteGID: theirs, HopLimit: 64, LocalACKTimeout: 19},
		PrivateData: priv,
	}
	mad, err := req.Append(ibcm.AppendHeader(nil, ibcm.CMHeader(ibcm.AttrREQ, tid)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		if err := h.SendGSI(ours, theirs, engine.GSIQPN, mad); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			hdr, data, err := ibcm.ParseMAD(m)
			if err != nil {
				t.Fatalf("the guest's answer: %v", err)
			}
			if hdr.Attr != ibcm.AttrREJ || hdr.TID != tid {
				t.Fatalf("the guest answered %v (TID %#x), want a REJ of TID %#x", hdr.Attr, hdr.TID, uint64(tid))
			}
			rej, err := ibcm.ParseREJ(data)
			if err != nil {
				t.Fatal(err)
			}
			if rej.RemoteCommID != commID || rej.MessageRejected != ibcm.MsgREQ || rej.Reason != ibcm.RejectInvalidServiceID {
				t.Fatalf("REJ %+v: want reason %d (invalid service ID) for our REQ %#x", rej, ibcm.RejectInvalidServiceID, uint32(commID))
			}
			t.Logf("the guest's kernel CM rejected the REQ: reason %d, its comm ID %#x", rej.Reason, rej.LocalCommID)
			if st := h.WireStats(""); st.GSI == 0 {
				t.Errorf("wire counters %+v: no GSI datagram counted", st)
			}
			return
		case <-time.After(time.Second):
			if time.Now().After(deadline) {
				t.Fatalf("no answer from the guest's CM in 30 s; link %+v, wire %+v", l.Stats(), h.WireStats(""))
			}
		}
	}
}
