package connmgr_test

// A connection's life through the manager's API, as the daemon's commands
// drive it: dial, request, accept (REP), connect the QP, confirm (RTU),
// established, disconnect (DREQ, DREP) — between two managers over TCP,
// and between two sessions of one manager in process.

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/ibcm"
	"github.com/vrdma/vrdma/internal/proto"
)

func TestCMConnectLifecycle(t *testing.T) {
	tests := []struct {
		name string
		// managers returns the requester's manager and host, and the
		// listener's.
		managers func(t *testing.T) (*connmgr.Manager, *testHost, *connmgr.Manager, *testHost)
	}{
		{"two managers over CM MADs", func(t *testing.T) (*connmgr.Manager, *testHost, *connmgr.Manager, *testHost) {
			n := newGSINet()
			b, hb := madManager(t, n, nil)
			a, ha := madManager(t, n, nil)
			return a, ha, b, hb
		}},
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
			t.Cleanup(func() {
				if st := a.Stats(); st.Retransmits == 0 {
					t.Errorf("the requester sent nothing again: %+v", st)
				}
			})
			return a, ha, b, hb
		}},
		{"over CM MADs, each one twice", func(t *testing.T) (*connmgr.Manager, *testHost, *connmgr.Manager, *testHost) {
			n := newGSINet()
			n.setRule(func(ibcm.AttrID, int) fate { return duplicate })
			b, hb := madManager(t, n, nil)
			a, ha := madManager(t, n, nil)
			t.Cleanup(func() {
				if st := b.Stats(); st.Duplicates == 0 {
					t.Errorf("the listener saw no duplicate: %+v", st)
				}
			})
			return a, ha, b, hb
		}},
		{"one manager, in process", func(t *testing.T) (*connmgr.Manager, *testHost, *connmgr.Manager, *testHost) {
			m, h := newManager(t, nil)
			return m, h, m, h
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ma, ha, mb, hb := tt.managers(t)
			sb := listenSession(t, mb, hb, 7000, 1)
			sa := newSession(t, ha.adapter)
			qa, qpA := sa.newQP(abi.QPTypeRC)
			const psnA, psnB = 0x100, 0x200
			dst := hb.gid()
			var resp proto.CMConnectResp
			if err := sa.do(func() (err error) {
				resp, err = ma.Connect(sa, proto.CMConnectReq{ID: 5, QP: qa, PSN: psnA, Addr: dst[:], Port: 7000,
					RdAtomic: 4, PrivateData: []byte("req")})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if src := ha.gid(); !bytes.Equal(resp.LocalAddr, src[:]) || resp.SGIDIndex != 0 {
				t.Fatalf("connect answered %+v, want the requester's GID %x", resp, src)
			}

			ev := sb.event()
			if ev.Type != proto.CMEventRequest || ev.QPN != qpA.QPN() || ev.PSN != psnA || ev.RdAtomic != 4 ||
				!bytes.Equal(ev.GID, resp.LocalAddr) || padded(ev.PrivateData) != "req" {
				t.Fatalf("request %+v", ev)
			}
			qb, qpB := sb.newQP(abi.QPTypeRC)
			connect(t, qpB, ev, psnB, false)
			if err := sb.do(func() error {
				return mb.Accept(sb, proto.CMAcceptReq{ID: ev.ID, QP: qb, PSN: psnB, RdAtomic: 2, PrivateData: []byte("rep")})
			}); err != nil {
				t.Fatal(err)
			}

			ev = sa.event()
			if ev.Type != proto.CMEventReply || ev.ID != 5 || ev.QPN != qpB.QPN() || ev.PSN != psnB || ev.RdAtomic != 2 ||
				!bytes.Equal(ev.GID, dst[:]) || padded(ev.PrivateData) != "rep" {
				t.Fatalf("reply %+v", ev)
			}
			connect(t, qpA, ev, psnA, true)
			if err := sa.do(func() error {
				return ma.Accept(sa, proto.CMAcceptReq{ID: 5, PrivateData: []byte("rtu")})
			}); err != nil {
				t.Fatal(err)
			}
			if ev := sb.event(); ev.Type != proto.CMEventEstablished || padded(ev.PrivateData) != "rtu" {
				t.Fatalf("event %+v, want established", ev)
			}
			if a, b, l := sa.holds(connmgr.Connections), sb.holds(connmgr.Connections), sb.holds(connmgr.Listeners); a != 1 || b != 1 || l != 1 {
				t.Fatalf("established: the requester is charged %d connections, the listener %d and %d listeners; want 1, 1, 1", a, b, l)
			}

			if err := sa.do(func() error {
				return ma.Disconnect(sa, proto.CMDisconnectReq{ID: 5, PrivateData: []byte("bye")})
			}); err != nil {
				t.Fatal(err)
			}
			if st := qpA.State(); st != abi.QPStateErr {
				t.Fatalf("the requester's QP is in %v after its disconnect, want ERR", st)
			}
			if ev := sb.event(); ev.Type != proto.CMEventDisconnected || padded(ev.PrivateData) != "bye" {
				t.Fatalf("event %+v, want disconnected", ev)
			}
			if st := qpB.State(); st != abi.QPStateErr {
				t.Fatalf("the listener's QP is in %v after the peer's disconnect, want ERR", st)
			}
			if ev := sa.event(); ev.Type != proto.CMEventDisconnectDone || ev.ID != 5 {
				t.Fatalf("event %+v, want the disconnection done", ev)
			}
			err := sa.do(func() error { return ma.Disconnect(sa, proto.CMDisconnectReq{ID: 5}) })
			if proto.CodeOf(err) != proto.CodeNotFound {
				t.Fatalf("a second disconnect: %v, want CodeNotFound", err)
			}
			if a, b := sa.holds(connmgr.Connections), sb.holds(connmgr.Connections); a != 0 || b != 0 {
				t.Fatalf("disconnected: the requester is still charged %d connections, the listener %d", a, b)
			}
		})
	}
}

// padded is private data as sent, without the zeros a CM MAD pads it with.
func padded(b []byte) string { return string(bytes.TrimRight(b, "\x00")) }

// A listener's library that keeps its QP (KeepQP, as librdmacm asks)
// finds it as it was when the peer disconnects: rdma_cm moves the passive
// side's QP to ERR only when its application calls rdma_disconnect, so a
// last message in flight is not flushed. Without KeepQP the daemon moves
// it to ERR with the event (the Go API's contract).
func TestDisconnectKeepsTheListenersQP(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("KeepQP %v", keep), func(t *testing.T) {
			n := newGSINet()
			mb, hb := madManager(t, n, nil)
			ma, ha := madManager(t, n, nil)
			sb := listenSession(t, mb, hb, 7000, 1)
			sa := newSession(t, ha.adapter)
			qa, qpA := sa.newQP(abi.QPTypeRC)
			const psnA, psnB = 0x100, 0x200
			dst := hb.gid()
			if err := sa.do(func() error {
				_, err := ma.Connect(sa, proto.CMConnectReq{ID: 5, QP: qa, PSN: psnA, Addr: dst[:], Port: 7000, RdAtomic: 1, KeepQP: true})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			ev := sb.event()
			qb, qpB := sb.newQP(abi.QPTypeRC)
			connect(t, qpB, ev, psnB, false)
			if err := sb.do(func() error {
				return mb.Accept(sb, proto.CMAcceptReq{ID: ev.ID, QP: qb, PSN: psnB, RdAtomic: 1, KeepQP: keep})
			}); err != nil {
				t.Fatal(err)
			}
			connect(t, qpA, sa.event(), psnA, true)
			if err := sa.do(func() error { return ma.Accept(sa, proto.CMAcceptReq{ID: 5}) }); err != nil {
				t.Fatal(err)
			}
			if ev := sb.event(); ev.Type != proto.CMEventEstablished {
				t.Fatalf("event %+v, want established", ev)
			}
			before := qpB.State()
			if err := sa.do(func() error { return ma.Disconnect(sa, proto.CMDisconnectReq{ID: 5}) }); err != nil {
				t.Fatal(err)
			}
			if ev := sb.event(); ev.Type != proto.CMEventDisconnected {
				t.Fatalf("event %+v, want disconnected", ev)
			}
			want := abi.QPStateErr
			if keep {
				want = before
			}
			if st := qpB.State(); st != want {
				t.Fatalf("the listener's QP is in %v after the peer's disconnect, want %v", st, want)
			}
		})
	}
}
