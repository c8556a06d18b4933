package attack

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/switchview"
)

// TestOutsiderRoCE: mallory, a host with a RoCEv2 link on the segment of a
// switch with certificates but no certificate of its own, sends host b a CM
// request over RoCEv2 and RDMA WRITEs to a QP of b connected to it by hand.
// To the default instance neither reaches anyone: no REP, the listener
// hears nothing, b's memory is untouched, and b counts both in `vrdma
// switch show`. To an instance made with --native-endpoints, which is what
// they are for, the same request is answered and the same WRITE lands.
func TestOutsiderRoCE(t *testing.T) {
	f := newScene(t, true)
	f.b.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", f.hb.Iface)
	m := f.hm.StartDaemon(t, "--no-switch")
	m.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", f.hm.Iface)
	adm := f.admin(t, f.b)
	if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: "native", Adapters: 1, NativeEndpoints: true}); err != nil {
		t.Fatal(err)
	}
	// outsiders is what b's `vrdma switch show` counts as dropped from
	// outside the switch.
	outsiders := func(t *testing.T) switchview.OutsiderStats {
		t.Helper()
		info, err := adm.Switch()
		if err != nil {
			t.Fatal(err)
		}
		return info.Outsiders
	}

	t.Run("CM request to a member's listener", func(t *testing.T) {
		b := openOn(t, f.b, "", f.hb.IPv4)
		ml := openOn(t, m, "", f.hm.IPv4)
		l, err := b.dev.Listen(0)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		before := outsiders(t).Requests
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a hang guard
		defer cancel()
		dialed := make(chan error, 1)
		go func() {
			_, err := ml.dev.Dial(ctx, ml.qp, f.hb.IPv4, l.Port(), []byte("let me in"))
			dialed <- err
		}()
		heard := make(chan *vrdma.ConnRequest, 1)
		go func() {
			if req, err := l.Accept(ctx); err == nil {
				heard <- req
			}
		}()
		// The REQ and at least one retransmission of it are dropped, and
		// the listener hears of neither.
		eventually(t, 30*time.Second, "b drops mallory's request and its retransmission", func() (bool, string) {
			select {
			case req := <-heard:
				t.Fatalf("the listener got mallory's request (from %v)", req.RemoteAddr)
			case err := <-dialed:
				t.Fatalf("mallory's dial ended before b dropped its request twice: %v", err)
			default:
			}
			n := outsiders(t).Requests - before
			return n >= 2, fmt.Sprintf("requests dropped: %d", n)
		})
		cancel()
		if err := <-dialed; err == nil {
			t.Fatal("mallory's request was answered: it connected to b's listener")
		}
		select {
		case req := <-heard:
			t.Fatalf("the listener got mallory's request (from %v)", req.RemoteAddr)
		default:
		}
	})

	t.Run("CM request to a native endpoint", func(t *testing.T) {
		b := openOn(t, f.b, "native", f.hb.IPv4)
		ml := openOn(t, m, "", f.hm.IPv4)
		l, err := b.dev.Listen(0)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx := testCtx(t, 30*time.Second)
		got := make(chan error, 1)
		go func() {
			req, err := l.Accept(ctx)
			if err == nil {
				_, err = req.Accept(ctx, b.qp, []byte("welcome"))
			}
			got <- err
		}()
		if _, err := ml.dev.Dial(ctx, ml.qp, f.hb.IPv4, l.Port(), []byte("hello")); err != nil {
			t.Fatalf("mallory's request to the native endpoint: %v", err)
		}
		if err := <-got; err != nil {
			t.Fatalf("the native endpoint's listener: %v", err)
		}
	})

	for _, tc := range []struct {
		name, instance string
		lands          bool
	}{{"connected WRITE to a member's QP", "", false}, {"connected WRITE to a native endpoint", "native", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := openOn(t, f.b, tc.instance, f.hb.IPv4)
			ml := openOn(t, m, "", f.hm.IPv4)
			connectByHand(t, b, ml)
			before := outsiders(t).Packets
			want := bytes.Repeat([]byte("mallory!"), 512)
			copy(ml.mr.Bytes(), want)
			rm := b.mr.Remote()
			if err := ml.qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
				SGL: []ibv.SGE{ml.mr.SGE(0, len(want))}, RemoteAddr: rm.Addr, RKey: rm.RKey}}); err != nil {
				t.Fatal(err)
			}
			if tc.lands {
				var wc [1]vrdma.WorkCompletion
				if n, err := ml.cq.PollWait(testCtx(t, 30*time.Second), wc[:], 1000); err != nil || n != 1 || wc[0].Err() != nil {
					t.Fatalf("mallory's WRITE to the native endpoint: %d completions, %v, %v", n, err, wc[0].Err())
				}
				if !bytes.Equal(b.mr.Bytes()[:len(want)], want) {
					t.Fatal("the WRITE completed but the native endpoint's region does not hold its bytes")
				}
				return
			}
			eventually(t, 30*time.Second, "b drops mallory's packets", func() (bool, string) {
				if bytes.Contains(b.mr.Bytes(), []byte("mallory!")) {
					t.Fatal("mallory's WRITE reached b's region")
				}
				n := outsiders(t).Packets - before
				return n >= 2, fmt.Sprintf("packets dropped: %d", n) // the WRITE and a retry of it
			})
			if bytes.Contains(b.mr.Bytes(), []byte("mallory!")) {
				t.Fatal("mallory's WRITE reached b's region")
			}
		})
	}
}

// connectByHand connects a's QP and b's to each other without the
// connection manager, as two programs that swapped endpoints would.
func connectByHand(t *testing.T, a, b *side) {
	t.Helper()
	ea, err := a.qp.Endpoint(a.gid)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.qp.Endpoint(b.gid)
	if err != nil {
		t.Fatal(err)
	}
	oa, ob := vrdma.DefaultConnectOptions(), vrdma.DefaultConnectOptions()
	oa.GIDIndex, ob.GIDIndex = uint8(a.gid), uint8(b.gid)
	for _, c := range []struct {
		s *side
		e vrdma.Endpoint
		o *vrdma.ConnectOptions
	}{{a, eb, &oa}, {b, ea, &ob}} {
		if err := c.s.qp.Connect(c.e, c.o); err != nil {
			t.Fatalf("connecting by hand: %v", err)
		}
	}
}
