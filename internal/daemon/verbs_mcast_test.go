package daemon_test

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// TestMcastRefusedOnVerbsUplink: attaching a UD QP of an instance bound to
// a verbs uplink to a multicast group (ibv_attach_mcast, which the
// library's rdma_join_multicast does) is refused with an error naming the
// link, not taken into the daemon's own groups, which never see the
// device's traffic; an instance without an uplink attaches as before.
func TestMcastRefusedOnVerbsUplink(t *testing.T) {
	cfg := linkConfig(t)
	cfg.VerbsHelper = fakeVerbsHelper(t, "datapath")
	d := startDaemon(t, cfg)
	a := admin(t, cfg.SocketPath)
	a.ok(proto.OpLinkAdd, proto.LinkSpec{Name: "hca0", Type: "verbs", Dev: "rxe0"}, nil)
	a.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm1", Adapters: 1, Uplink: "hca0"}, nil)
	a.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm2", Adapters: 1}, nil)
	group := [16]byte{10: 0xff, 11: 0xff, 12: 239, 15: 7}
	for _, tt := range []struct {
		inst string
		code proto.Code
		want string
	}{
		{"vm1", proto.CodeState, "multicast is not supported on verbs link hca0"},
		{"vm2", proto.CodeOK, ""},
	} {
		c := dial(t, d.SocketPath())
		c.ok(proto.OpHello, proto.HelloReq{Instance: tt.inst, Device: "vrdma0", Client: "mcast-test"}, nil)
		var pd, cq, qp proto.HandleResp
		c.ok(proto.OpAllocPD, nil, &pd)
		c.ok(proto.OpCreateCQ, proto.CreateCQReq{CQE: 16}, &cq)
		c.ok(proto.OpCreateQP, proto.CreateQPReq{PD: pd.Handle, Type: uint8(abi.QPTypeUD), SendCQ: cq.Handle, RecvCQ: cq.Handle,
			Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}, &qp)
		c.ok(proto.OpModifyQP, proto.ModifyQPReq{Handle: qp.Handle, Mask: uint32(qpstate.MaskState | qpstate.MaskPort | qpstate.MaskPKeyIndex | qpstate.MaskQKey),
			Attr: qpstate.Attr{State: abi.QPStateInit, PortNum: 1, QKey: 0x01234567}}, nil)
		if tt.code == proto.CodeOK {
			c.ok(proto.OpAttachMcast, proto.McastReq{QP: qp.Handle, GID: group}, nil)
		} else {
			c.fails(proto.OpAttachMcast, proto.McastReq{QP: qp.Handle, GID: group}, tt.code, tt.want)
		}
		c.Close()
	}
}
