package connmgr_test

// XRC through the connection manager (docs/design/xrc.md): an XRC_SEND
// QP (initiator) dials, an XRC_RECV QP (target) answers, as Linux's CM
// connects XRC_INI and XRC_TGT ids — in process and over CM MADs, whose
// REQ and REP carry XRC as Linux's CM sends them.

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// newXRCQP gives the session an XRC QP in RESET: an initiator (a send CQ,
// no receive queue) or a target (in a domain of its own, nothing else).
func (s *session) newXRCQP(t abi.QPType) (uint32, *engine.QP) {
	s.t.Helper()
	cfg := engine.QPConfig{Type: t, Caps: proto.QPCaps{MaxSendWR: 4, MaxSendSGE: 1}}
	if t == abi.QPTypeXRCSend {
		cq, err := engine.NewCQ(16)
		if err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(func() { cq.Close() })
		cfg.PD, cfg.SendCQ = s.adapter.NewPD(), cq
	} else {
		cfg.XRCD = engine.NewXRCD(s.adapter)
	}
	q, err := engine.NewQP(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { q.Destroy() })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.qps[s.next] = q
	return s.next, q
}

// connectXRC takes an XRC QP to RTR (the target) or RTS (the initiator)
// with what ev says of its peer, with the attributes the kernel's CM gives
// each (cm_init_qp_*_attr): the responder's for the target only, the
// requester's for the initiator only.
func connectXRC(t testing.TB, q *engine.QP, ev proto.CMEvent, psn uint32) {
	t.Helper()
	ini := q.Type() == abi.QPTypeXRCSend
	rtr := qpstate.MaskState | qpstate.MaskAV | qpstate.MaskPathMTU | qpstate.MaskDestQPN | qpstate.MaskRQPSN
	if !ini {
		rtr |= qpstate.MaskMaxDestRdAtomic | qpstate.MaskMinRNRTimer
	}
	steps := []struct {
		attr qpstate.Attr
		mask qpstate.Mask
	}{
		{qpstate.Attr{State: abi.QPStateInit, PortNum: 1, AccessFlags: abi.AccessRemoteWrite},
			qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskAccessFlags},
		{qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DGID: [16]byte(ev.GID), SGIDIndex: ev.SGIDIndex, PortNum: 1},
			PathMTU: abi.MTU(ev.MTU), DestQPN: ev.QPN, RQPSN: ev.PSN, MaxDestRdAtomic: ev.RdAtomic, MinRNRTimer: 12}, rtr},
	}
	if ini {
		steps = append(steps, struct {
			attr qpstate.Attr
			mask qpstate.Mask
		}{qpstate.Attr{State: abi.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: psn, MaxRdAtomic: ev.RdAtomic},
			qpstate.MaskState | qpstate.MaskTimeout | qpstate.MaskRetryCnt | qpstate.MaskRNRRetry | qpstate.MaskSQPSN | qpstate.MaskMaxQPRdAtomic})
	}
	for _, st := range steps {
		if _, err := q.Modify(&st.attr, st.mask); err != nil {
			t.Fatalf("modify %v QP to %v: %v", q.Type(), st.attr.State, err)
		}
	}
}

func TestCMConnectXRC(t *testing.T) {
	for _, tt := range []struct {
		name string
		mads bool
	}{
		{"two managers over CM MADs", true},
		{"one manager, in process", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var n *gsiNet
			ma, ha, mb, hb := func() (*connmgr.Manager, *testHost, *connmgr.Manager, *testHost) {
				if !tt.mads {
					m, h := newManager(t, nil)
					return m, h, m, h
				}
				n = newGSINet()
				b, hb := madManager(t, n, nil)
				a, ha := madManager(t, n, nil)
				return a, ha, b, hb
			}()
			sb := listenSession(t, mb, hb, 7000, 1)
			sa := newSession(t, ha.adapter)
			dst := hb.gid()

			// A target only answers.
			tgtA, _ := sa.newXRCQP(abi.QPTypeXRCRecv)
			err := sa.do(func() error {
				_, err := ma.Connect(sa, proto.CMConnectReq{ID: 4, QP: tgtA, Addr: dst[:], Port: 7000})
				return err
			})
			if proto.CodeOf(err) != proto.CodeInvalid {
				t.Fatalf("dialling from an XRC_RECV QP: %v, want CodeInvalid", err)
			}

			ini, qpIni := sa.newXRCQP(abi.QPTypeXRCSend)
			const psnA, psnB = 0x100, 0x200
			if err := sa.do(func() error {
				_, err := ma.Connect(sa, proto.CMConnectReq{ID: 5, QP: ini, PSN: psnA, Addr: dst[:], Port: 7000, RdAtomic: 4, PrivateData: []byte("req")})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			ev := sb.event()
			// The target serves as many READs and atomics as the initiator
			// issues (its REQ's initiator depth).
			if ev.Type != proto.CMEventRequest || ev.QPType != cm.QPTypeXRCSend || ev.QPN != qpIni.QPN() || ev.PSN != psnA ||
				ev.RdAtomic != 4 || padded(ev.PrivateData) != "req" {
				t.Fatalf("request %+v: want an XRC_SEND QP's, rd_atomic 4", ev)
			}
			if n != nil {
				reqs := n.mads(ibcm.AttrREQ)
				_, d, _ := ibcm.ParseMAD(reqs[len(reqs)-1].mad[:])
				r, err := ibcm.ParseREQ(d)
				ps, port, _ := ibcm.ParseServiceID(r.ServiceID)
				if err != nil || r.TransportType != 3 || r.ExtTransportType != 1 || ps != ibcm.PortSpaceIB || port != 7000 ||
					r.ResponderResources != 0 || r.InitiatorDepth != 4 || r.RetryCount != 0 || r.RNRRetryCount != 0 || r.LocalQPN != qpIni.QPN() {
					t.Fatalf("the REQ MAD %+v (%v): want transport 3, extended 1, RDMA_PS_IB port 7000, no responder resources or retry counts, initiator depth 4", r, err)
				}
			}

			// Neither an RC QP nor an initiator answers an initiator.
			for _, typ := range []abi.QPType{abi.QPTypeRC, abi.QPTypeXRCSend} {
				var h uint32
				if typ == abi.QPTypeRC {
					h, _ = sb.newQP(typ)
				} else {
					h, _ = sb.newXRCQP(typ)
				}
				if err := sb.do(func() error { return mb.Accept(sb, proto.CMAcceptReq{ID: ev.ID, QP: h, PSN: psnB}) }); proto.CodeOf(err) != proto.CodeInvalid {
					t.Fatalf("answering an XRC request with a %v QP: %v, want CodeInvalid", typ, err)
				}
			}
			tgt, qpTgt := sb.newXRCQP(abi.QPTypeXRCRecv)
			connectXRC(t, qpTgt, ev, psnB)
			if err := sb.do(func() error {
				return mb.Accept(sb, proto.CMAcceptReq{ID: ev.ID, QP: tgt, PSN: psnB, RdAtomic: 2, PrivateData: []byte{0, 0, 0, 7}})
			}); err != nil {
				t.Fatal(err)
			}
			ev = sa.event()
			if ev.Type != proto.CMEventReply || ev.QPN != qpTgt.QPN() || ev.PSN != psnB || ev.RdAtomic != 2 || padded(ev.PrivateData) != "\x00\x00\x00\x07" {
				t.Fatalf("reply %+v: want the target's QPN %d, rd_atomic 2", ev, qpTgt.QPN())
			}
			if n != nil {
				reps := n.mads(ibcm.AttrREP)
				_, d, _ := ibcm.ParseMAD(reps[len(reps)-1].mad[:])
				r, err := ibcm.ParseREP(d)
				if err != nil || r.LocalQPN != 0 || r.LocalEECN != qpTgt.QPN() || !r.SRQ || r.InitiatorDepth != 0 || r.ResponderResources != 2 {
					t.Fatalf("the REP MAD %+v (%v): want Local QPN 0, the target's QPN %d as the Local EE Context Number, SRQ, initiator depth 0", r, err, qpTgt.QPN())
				}
			}
			connectXRC(t, qpIni, ev, psnA)
			if err := sa.do(func() error { return ma.Accept(sa, proto.CMAcceptReq{ID: 5}) }); err != nil {
				t.Fatal(err)
			}
			if ev := sb.event(); ev.Type != proto.CMEventEstablished {
				t.Fatalf("event %+v, want established", ev)
			}
			if err := sa.do(func() error { return ma.Disconnect(sa, proto.CMDisconnectReq{ID: 5}) }); err != nil {
				t.Fatal(err)
			}
			if ev := sb.event(); ev.Type != proto.CMEventDisconnected {
				t.Fatalf("event %+v, want disconnected", ev)
			}
			if ev := sa.event(); ev.Type != proto.CMEventDisconnectDone {
				t.Fatalf("event %+v, want the disconnection done", ev)
			}
		})
	}
}
