package daemon_test

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/verbs"
	"golang.org/x/sys/unix"
)

// fakeSRQReply is the fake helper's reply to an SRQ request: the SRQ it
// makes has what was asked (handle 5); a QP on it is QPN 0x1200; a query
// says 8 entries, limit 0.
func fakeSRQReply(op verbs.Op, body []byte) []byte {
	ne := binary.NativeEndian
	switch op {
	case verbs.OpCreateSRQ:
		return verbs.AppendSRQ(nil, verbs.SRQ{Handle: 5, Attr: verbs.SRQAttr{MaxWR: ne.Uint32(body), MaxSGE: ne.Uint32(body[4:]), Limit: ne.Uint32(body[8:])}})
	case verbs.OpCreateQPSRQ:
		b := ne.AppendUint32(ne.AppendUint32(nil, 9), 0x1200)
		b = append(b, body[8:28]...) // the capabilities asked
		return ne.AppendUint32(b, 0)
	}
	return verbs.AppendSRQAttr(nil, verbs.SRQAttr{MaxWR: 8, MaxSGE: 1})
}

// TestSRQOnVerbsUplink: an instance bound to a verbs uplink gets an SRQ of
// the device with a doorbell (a second descriptor) and a ring whose notify
// word asks the library to ring it, and QPs on that SRQ are made (the
// device's QPN); an unbound instance's SRQ has no doorbell and a clear
// word, as before.
func TestSRQOnVerbsUplink(t *testing.T) {
	cfg := linkConfig(t)
	cfg.VerbsHelper = fakeVerbsHelper(t, "datapath")
	startDaemon(t, cfg)
	c := admin(t, cfg.SocketPath)
	c.ok(proto.OpLinkAdd, proto.LinkSpec{Name: "hca0", Type: "verbs", Dev: "rxe0"}, nil)
	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vb", Adapters: 1, Uplink: "hca0"}, nil)
	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vs", Adapters: 1}, nil)
	for _, tc := range []struct {
		inst   string
		bell   bool
		notify uint32
		qpn    uint32 // 0: any
	}{
		{"vb", true, 1, 0x1200},
		{"vs", false, 0, 0},
	} {
		t.Run(tc.inst, func(t *testing.T) {
			s := dial(t, cfg.SocketPath)
			defer s.Close()
			s.ok(proto.OpHello, proto.HelloReq{Instance: tc.inst, Device: "vrdma0", Client: "srq-test"}, nil)
			var pd, cq proto.HandleResp
			s.ok(proto.OpAllocPD, nil, &pd)
			s.ok(proto.OpCreateCQ, proto.CreateCQReq{CQE: 16}, &cq)
			r := s.call(proto.OpCreateSRQ, mustJSON(proto.CreateSRQReq{PD: pd.Handle, MaxWR: 8, MaxSGE: 1}))
			defer proto.CloseFDs(r.fds)
			if r.h.Code != proto.CodeOK {
				t.Fatalf("create_srq: %v: %s", r.h.Code, r.msg())
			}
			var srq proto.CreateSRQResp
			if err := json.Unmarshal(r.body, &srq); err != nil {
				t.Fatal(err)
			}
			want := 1
			if tc.bell {
				want = 2
			}
			if len(r.fds) != want {
				t.Fatalf("create_srq gave %d descriptors, want %d (the ring%s)", len(r.fds), want, map[bool]string{true: " and the doorbell"}[tc.bell])
			}
			mem, err := unix.Mmap(r.fds[0], 0, srq.Size, unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Munmap(mem)
			if got := binary.LittleEndian.Uint32(mem[srq.Ring.Offset+abi.RingNotifyOff:]); got != tc.notify {
				t.Fatalf("the SRQ ring's notify word is %d, want %d", got, tc.notify)
			}
			if tc.bell {
				if _, err := unix.Write(r.fds[1], []byte{1}); err != nil {
					t.Fatalf("ringing the SRQ's doorbell: %v", err)
				}
			}
			var qp proto.CreateQPResp
			s.ok(proto.OpCreateQP, proto.CreateQPReq{PD: pd.Handle, Type: uint8(abi.QPTypeRC), SendCQ: cq.Handle, RecvCQ: cq.Handle, SRQ: srq.Handle,
				Caps: proto.QPCaps{MaxSendWR: 4, MaxSendSGE: 1}}, &qp)
			if tc.qpn != 0 && qp.QPN != tc.qpn {
				t.Fatalf("the QP on the SRQ has QPN %#x, want the device's %#x", qp.QPN, tc.qpn)
			}
		})
	}
}
