package connmgr_test

// What the manager does with the messages another host's CM sends it over
// MADs: requests it serves or rejects with the reason, and messages for
// connections it does not have.

import (
	"bytes"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

// madOf is the CM MAD that carries msg as attr.
func madOf(t testing.TB, attr ibcm.AttrID, msg interface{ Append([]byte) ([]byte, error) }) []byte {
	t.Helper()
	b, err := msg.Append(ibcm.AppendHeader(nil, ibcm.CMHeader(attr, 0x77)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A message for a connection the manager does not have: a REP or an RTU
// gets a REJ (so that the sender's side ends too), a DREQ gets its DREP,
// a DREP or a REJ nothing.
func TestCMUnknownIDs(t *testing.T) {
	n := newGSINet()
	linux := n.end(linuxGID)
	m, h := madManager(t, n, nil)
	dst := h.gid()
	linux.send(t, n, dst, madOf(t, ibcm.AttrREP, &ibcm.REP{LocalCommID: 5, RemoteCommID: 0x1234, LocalQPN: 1, StartingPSN: 2}))
	if rej := lastREJ(t, n, 1); rej.RemoteCommID != 5 || rej.Reason != ibcm.RejectInvalidCommID || rej.MessageRejected != ibcm.MsgREP {
		t.Fatalf("REJ %+v, want an invalid comm ID of 5", rej)
	}
	linux.send(t, n, dst, madOf(t, ibcm.AttrRTU, &ibcm.RTU{LocalCommID: 6, RemoteCommID: 0x1234}))
	if rej := lastREJ(t, n, 2); rej.RemoteCommID != 6 || rej.Reason != ibcm.RejectInvalidCommID {
		t.Fatalf("REJ %+v, want an invalid comm ID of 6", rej)
	}
	linux.send(t, n, dst, madOf(t, ibcm.AttrDREQ, &ibcm.DREQ{LocalCommID: 7, RemoteCommID: 0x1234}))
	waitFor(t, "a DREP", func() bool { return len(n.mads(ibcm.AttrDREP)) == 1 })
	_, d, _ := ibcm.ParseMAD(n.mads(ibcm.AttrDREP)[0].mad[:])
	if drep, err := ibcm.ParseDREP(d); err != nil || drep.RemoteCommID != 7 {
		t.Fatalf("DREP %+v (%v), want one of 7", drep, err)
	}
	linux.send(t, n, dst, madOf(t, ibcm.AttrDREP, &ibcm.DREP{LocalCommID: 8, RemoteCommID: 0x1234}))
	linux.send(t, n, dst, madOf(t, ibcm.AttrREJ, &ibcm.REJ{LocalCommID: 9, RemoteCommID: 0x1234, Reason: ibcm.RejectConsumerDefined}))
	linux.send(t, n, dst, madOf(t, ibcm.AttrREJ, &ibcm.REJ{LocalCommID: 9, Reason: ibcm.RejectTimeout}))
	// Nothing answered those three: the next REJ is the answer to this.
	linux.send(t, n, dst, reqMAD(t, dst, 9, nil, func(r *ibcm.REQ) { r.LocalCommID = 10 }))
	if rej := lastREJ(t, n, 3); rej.RemoteCommID != 10 || rej.Reason != ibcm.RejectInvalidServiceID {
		t.Fatalf("REJ %+v, want no listener for request 10", rej)
	}
	if st := m.Stats(); st.MADsIn != 7 {
		t.Fatalf("stats %+v, want 7 MADs run", st)
	}
}

// A request reaches the listening session with the requester's attributes;
// requests the manager cannot serve are rejected with the reason; the
// requester that gives up, and the session that ends, end the request.
func TestCMRequests(t *testing.T) {
	n := newGSINet()
	linux := n.end(linuxGID)
	m, h := madManager(t, n, nil)
	s := listenSession(t, m, h, 7000, 1)
	dst := h.gid()
	first := reqMAD(t, dst, 7000, []byte("hi"), func(r *ibcm.REQ) { r.LocalCommID = 21 })
	linux.send(t, n, dst, first)
	ev := s.event()
	if ev.Type != proto.CMEventRequest || ev.Listener != 1 || ev.ID < proto.CMDaemonIDBase || ev.QPN != 0x1f || ev.PSN != 0x5059d4 ||
		ev.MTU != 3 || ev.RdAtomic != 1 || ev.QPType != uint8(abi.QPTypeRC) || padded(ev.PrivateData) != "hi" ||
		!bytes.Equal(ev.GID, linuxGID[:]) || ev.RemotePort != 0x8afa || ev.LocalPort != 7000 {
		t.Fatalf("request event %+v", ev)
	}
	linux.send(t, n, dst, first) // the same request again: an MRA, no second event
	waitFor(t, "an MRA", func() bool { return len(n.mads(ibcm.AttrMRA)) == 1 })

	rejs := 0
	for _, tt := range []struct {
		id     uint32
		port   uint16
		mod    func(*ibcm.REQ)
		reason uint16
	}{
		{22, 7000, func(r *ibcm.REQ) { r.Primary.RemoteGID = [16]byte{10: 0xff, 11: 0xff, 198, 51, 100, 7} }, ibcm.RejectInvalidGID},
		{23, 7000, nil, ibcm.RejectNoResources}, // the backlog, 1, is full
		{24, 7001, nil, ibcm.RejectInvalidServiceID},
	} {
		linux.send(t, n, dst, reqMAD(t, dst, tt.port, nil, func(r *ibcm.REQ) {
			r.LocalCommID = tt.id
			if tt.mod != nil {
				tt.mod(r)
			}
		}))
		rejs++
		if rej := lastREJ(t, n, rejs); rej.RemoteCommID != tt.id || rej.Reason != tt.reason {
			t.Fatalf("REJ %+v, want reason %d for request %d", rej, tt.reason, tt.id)
		}
	}

	// The requester gives up: the session hears of it.
	linux.send(t, n, dst, madOf(t, ibcm.AttrREJ, &ibcm.REJ{LocalCommID: 21, Reason: ibcm.RejectTimeout}))
	if ev := s.event(); ev.Type != proto.CMEventRejected || ev.Reason != ibcm.RejectTimeout {
		t.Fatalf("event %+v, want the request rejected", ev)
	}
	// A request the session holds when it ends is rejected.
	linux.send(t, n, dst, reqMAD(t, dst, 7000, nil, func(r *ibcm.REQ) { r.LocalCommID = 25 }))
	if ev := s.event(); ev.Type != proto.CMEventRequest {
		t.Fatalf("event %+v", ev)
	}
	m.CloseSession(s)
	if rej := lastREJ(t, n, rejs+1); rej.RemoteCommID != 25 || rej.Reason != ibcm.RejectInvalidServiceID {
		t.Fatalf("REJ %+v, want no listener for request 25", rej)
	}
	linux.send(t, n, dst, reqMAD(t, dst, 7000, nil, func(r *ibcm.REQ) { r.LocalCommID = 26 }))
	if rej := lastREJ(t, n, rejs+2); rej.RemoteCommID != 26 || rej.Reason != ibcm.RejectInvalidServiceID {
		t.Fatalf("REJ %+v, want no listener for request 26: the port went with the session", rej)
	}
}
