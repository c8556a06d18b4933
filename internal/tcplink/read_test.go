package tcplink_test

// Large RDMA READs over the TCP channel, many outstanding: the responder
// answers each READ with a megabyte of responses at once, more than a
// peer's send queue holds. They must complete with the right bytes and
// without a storm of go-back-Ns (docs/design/tcp-channel.md, *Backpressure*).

import (
	"context"
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/pki/pkitest"
)

func TestLargeReadsOverTCP(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testLargeReads(t, nil, false) })
	t.Run("TLS", func(t *testing.T) { testLargeReads(t, pkitest.NewCA(t, "vrdma test CA"), false) })
	// perftest's ib_read_bw server leaves its QP in RTR: it only answers.
	t.Run("responder in RTR", func(t *testing.T) { testLargeReads(t, nil, true) })
}

// testLargeReads reads from host b's region into host a's, over plain TCP
// or TLS under ca; with rtrOnly, b's QP stays in RTR.
func testLargeReads(t *testing.T, ca *pkitest.CA, rtrOnly bool) {
	const (
		size   = 1 << 20 // one READ
		slots  = 8       // distinct source regions, read in turn
		reads  = 64      // READs in all
		window = 32      // posted at once
		mtu    = 4096
		// packets is how many READ response packets the transfer takes.
		packets = reads * size / mtu
	)
	peers := &peerTable{m: make(map[netip.Addr]string)}
	ha := startHost(t, peers, 1, ca)
	hb := startHost(t, peers, 2, ca)
	a := newEndSized(t, ha, slots*size, window)
	b := newEndSized(t, hb, slots*size, window)
	o := vrdma.DefaultConnectOptions()
	o.GIDIndex, o.QKey, o.MaxRdAtomic = gidIndex, qkey, 128
	// A retransmit timer of 1 s, not 67 ms: a machine busy with other
	// work (or -race) must not make a stall look like a lost response.
	o.Timeout = 18
	ea, err := a.qp.Endpoint(gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.qp.Endpoint(gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.qp.Connect(eb, &o); err != nil {
		t.Fatal(err)
	}
	if rtrOnly {
		toRTR(t, b.qp, ea, &o)
	} else if err := b.qp.Connect(ea, &o); err != nil {
		t.Fatal(err)
	}
	am, bm := a.mr.Bytes(), b.mr.Bytes()
	for s := range slots {
		pattern(bm[s*size:(s+1)*size], byte(s*31+1))
	}
	before := portCounters(t, ha)

	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	wc := make([]vrdma.WorkCompletion, window)
	posted, done := 0, 0
	for done < reads {
		for posted < reads && posted-done < window {
			s := posted % slots
			a.post(t, vrdma.SendWR{ID: uint64(posted), Opcode: ibv.WRRDMARead, SGL: []ibv.SGE{a.mr.SGE(s*size, size)},
				RemoteAddr: b.mr.Addr() + uint64(s*size), RKey: b.mr.RKey()})
			posted++
		}
		n, err := a.cq.PollWait(ctx, wc, 100)
		if err != nil {
			t.Fatalf("%d of %d READs done: %v", done, reads, err)
		}
		for _, w := range wc[:n] {
			if w.Status != ibv.WCSuccess || w.ID != uint64(done) || w.Opcode != ibv.WCRDMARead || w.ByteLen != size {
				t.Fatalf("completion %+v (status %v), want READ %d of %d bytes, success", w, w.Status, done, size)
			}
			done++
		}
	}
	for s := range slots {
		expectBytes(t, "READ", am[s*size:(s+1)*size], bm[s*size:(s+1)*size])
	}
	after := portCounters(t, ha)
	resent := after.ResentPackets - before.ResentPackets
	drops := ha.link.Stats().DroppedQueueFull + hb.link.Stats().DroppedQueueFull
	t.Logf("%d READs of %d bytes: %d response packets; requester resent %d packets (%d go-back-Ns after a gap, %d timeouts); %d receive drops; links dropped %d frames on a full queue",
		reads, size, packets, resent, after.SeqNAKs-before.SeqNAKs, after.AckTimeouts-before.AckTimeouts, after.RxDrops-before.RxDrops, drops)
	// A lost frame now and then may be sent again; a storm resends the
	// transfer many times over.
	if resent > packets/100 {
		t.Errorf("the requester resent %d packets for a transfer of %d: READ responses were dropped or stalled, and sent again", resent, packets)
	}
}

// newEndSized is newEnd with a region of size bytes and room for depth
// send requests.
func newEndSized(t testing.TB, h *host, size, depth int) *end {
	t.Helper()
	pd, err := h.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pd.Dealloc() })
	mr, err := pd.AllocMR(size, allAccess)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mr.Dereg() })
	cq, err := h.dev.CreateCQ(2 * depth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cq.Destroy() })
	qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq,
		Cap: vrdma.QPCap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = qp.Destroy() })
	return &end{qp: qp, cq: cq, mr: mr, pd: pd}
}

// toRTR takes an RC QP from RESET to RTR, connected to remote, as
// Connect does but without the move to RTS.
func toRTR(t testing.TB, q *vrdma.QP, remote vrdma.Endpoint, o *vrdma.ConnectOptions) {
	t.Helper()
	init := ibv.QPAttr{State: ibv.QPSInit, PortNum: 1, AccessFlags: o.Access}
	if err := q.Modify(&init, ibv.AttrState|ibv.AttrPKeyIndex|ibv.AttrPort|ibv.AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	rtr := ibv.QPAttr{State: ibv.QPSRTR, PathMTU: ibv.MTU4096, DestQPN: remote.QPN, RQPSN: remote.PSN,
		AV:              ibv.AHAttr{DGID: remote.GID, SGIDIndex: o.GIDIndex, HopLimit: 64, PortNum: 1},
		MaxDestRdAtomic: o.MaxRdAtomic, MinRNRTimer: o.MinRNRTimer}
	mask := ibv.AttrState | ibv.AttrAV | ibv.AttrPathMTU | ibv.AttrDestQPN | ibv.AttrRQPSN | ibv.AttrMaxDestRdAtomic | ibv.AttrMinRNRTimer
	if err := q.Modify(&rtr, mask); err != nil {
		t.Fatal(err)
	}
}

func portCounters(t testing.TB, h *host) vrdma.Counters {
	t.Helper()
	p, err := h.dev.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	return p.Counters
}
