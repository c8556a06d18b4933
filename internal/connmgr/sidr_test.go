package connmgr_test

// SIDR: a UD QP's dial resolves the listener's UD QP and Q_Key, between
// two managers over CM MADs (with the first SIDR_REQ and SIDR_REP lost)
// and in process, with the same events.

import (
	"bytes"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

func TestCMSIDR(t *testing.T) {
	type managers func(t *testing.T) (*connmgr.Manager, *testHost, *connmgr.Manager, *testHost)
	for _, tt := range []struct {
		name     string
		managers managers
	}{
		{"over CM MADs, the first of each lost", func(t *testing.T) (*connmgr.Manager, *testHost, *connmgr.Manager, *testHost) {
			n := newGSINet()
			n.setRule(func(_ ibcm.AttrID, n int) fate {
				if n == 0 {
					return drop
				}
				return deliver
			})
			b, hb := madManager(t, n, nil)
			a, ha := madManager(t, n, nil)
			return a, ha, b, hb
		}},
		{"in process", func(t *testing.T) (*connmgr.Manager, *testHost, *connmgr.Manager, *testHost) {
			m, h := newManager(t, nil)
			return m, h, m, h
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ma, ha, mb, hb := tt.managers(t)
			sb := listenSession(t, mb, hb, 7000, 0)
			dst := hb.gid()
			dial := func(id uint32, port uint16) *session {
				sa := newSession(t, ha.adapter)
				qa, _ := sa.newQP(abi.QPTypeUD)
				if err := sa.do(func() error {
					_, err := ma.Connect(sa, proto.CMConnectReq{ID: id, QP: qa, Addr: dst[:], Port: port, PrivateData: []byte("udaddy")})
					return err
				}); err != nil {
					t.Fatal(err)
				}
				return sa
			}

			// Accepted: the listener's QPN and Q_Key reach the requester.
			sa := dial(5, 7000)
			ev := sb.event()
			if ev.Type != proto.CMEventRequest || ev.QPType != uint8(abi.QPTypeUD) || padded(ev.PrivateData) != "udaddy" ||
				!bytes.Equal(ev.GID, ha.adapter.GIDs()[0][:]) {
				t.Fatalf("request %+v", ev)
			}
			qb, qpB := sb.newQP(abi.QPTypeUD)
			if _, err := qpB.Modify(&qpstate.Attr{State: abi.QPStateInit, PortNum: 1, QKey: 0x11111111},
				qpstate.MaskState|qpstate.MaskPKeyIndex|qpstate.MaskPort|qpstate.MaskQKey); err != nil {
				t.Fatal(err)
			}
			if err := sb.do(func() error {
				return mb.Accept(sb, proto.CMAcceptReq{ID: ev.ID, QP: qb, PrivateData: []byte("welcome")})
			}); err != nil {
				t.Fatal(err)
			}
			got := sa.event()
			if got.Type != proto.CMEventEstablished || got.ID != 5 || got.QPN != qpB.QPN() || got.QKey != 0x11111111 ||
				!bytes.Equal(got.GID, dst[:]) || got.QPType != uint8(abi.QPTypeUD) || padded(got.PrivateData) != "welcome" {
				t.Fatalf("established %+v, want QPN %#x, Q_Key 0x11111111", got, qpB.QPN())
			}

			// Rejected by the listener; nobody on the port.
			sa = dial(6, 7000)
			ev = sb.event()
			if err := sb.do(func() error { return mb.Reject(sb, proto.CMRejectReq{ID: ev.ID}) }); err != nil {
				t.Fatal(err)
			}
			if got := sa.event(); got.Type != proto.CMEventRejected || got.Reason != 28 {
				t.Fatalf("event %+v, want rejected by the application", got)
			}
			sa = dial(7, 7001)
			if got := sa.event(); got.Type != proto.CMEventRejected || got.Reason != 8 {
				t.Fatalf("event %+v, want rejected: no listener", got)
			}
			for _, s := range []*session{sa, sb} {
				if n := s.holds(connmgr.Connections); n != 0 {
					t.Fatalf("a session still holds %d connections: SIDR leaves none", n)
				}
			}
		})
	}
}
