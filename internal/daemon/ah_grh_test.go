package daemon_test

import (
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// anyGID is an address vector with a GRH: a destination GID (an address of
// the documentation range), as a RoCE port needs.
var anyGID = qpstate.AddressVector{DGID: [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}, PortNum: 1}

// TestAddressVectorNeedsGRH: on a RoCE port an address vector must carry a
// GRH with the destination's GID, as rdma_rxe requires (the kernel refuses
// it with EINVAL): an address handle or a QP's RTR without one is refused,
// by LID or with no destination at all (pyverbs' test_create_ah_roce;
// before, both were accepted). A port configured for LID routing, by its
// instance or by the daemon, takes a destination named by LID alone; one
// with neither LID nor GID stays refused.
func TestAddressVectorNeedsGRH(t *testing.T) {
	for _, tc := range []struct {
		name       string
		daemonWide bool   // Config.LIDRouting
		instance   string // "" the default instance; else one made with LIDRouting: lidInst
		lidInst    bool
		byLID      bool // a DLID-only address vector is taken
	}{
		{name: "default port"},
		{name: "instance without LID routing", instance: "plain"},
		{name: "instance with LID routing", instance: "lids", lidInst: true, byLID: true},
		{name: "daemon with LID routing", daemonWide: true, byLID: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := daemontest.StartWith(t, func(c *daemon.Config) { c.LIDRouting = tc.daemonWide })
			if tc.instance != "" {
				adm := dial(t, d.SocketPath())
				adm.ok(proto.OpHello, proto.HelloReq{}, nil)
				adm.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: tc.instance, Adapters: 1, LIDRouting: tc.lidInst}, nil)
			}
			c := dial(t, d.SocketPath())
			c.ok(proto.OpHello, proto.HelloReq{Instance: tc.instance, Device: "vrdma0"}, nil)
			var port proto.PortAttr
			c.ok(proto.OpQueryPort, proto.QueryPortReq{Port: 1}, &port)
			if port.LID == 0 {
				t.Fatal("the port has no LID")
			}
			var pd proto.HandleResp
			c.ok(proto.OpAllocPD, nil, &pd)
			ah := func(av qpstate.AddressVector) reply {
				return c.call(proto.OpCreateAH, mustJSON(proto.CreateAHReq{PD: pd.Handle, AV: av}))
			}
			if r := ah(anyGID); r.h.Code != proto.CodeOK {
				t.Errorf("an address handle with a GRH: %v %s", r.h.Code, r.msg())
			}
			if r := ah(qpstate.AddressVector{PortNum: 1}); r.h.Code != proto.CodeInvalid || !strings.Contains(r.msg(), "GRH") {
				t.Errorf("an address handle with neither GID nor LID: %v %q, want CodeInvalid saying a GRH is needed", r.h.Code, r.msg())
			}
			byLID := qpstate.AddressVector{DLID: port.LID, PortNum: 1}
			r := ah(byLID)
			if tc.byLID && r.h.Code != proto.CodeOK {
				t.Errorf("an address handle by LID 0x%x on a port routing by LID: %v %s", port.LID, r.h.Code, r.msg())
			}
			if !tc.byLID && (r.h.Code != proto.CodeInvalid || !strings.Contains(r.msg(), "--lid-routing")) {
				t.Errorf("an address handle by LID 0x%x alone: %v %q, want CodeInvalid naming --lid-routing", port.LID, r.h.Code, r.msg())
			}
			r, _ = rcToLID(t, c, byLID)
			if tc.byLID && r.h.Code != proto.CodeOK {
				t.Errorf("modify_qp to RTR by LID 0x%x on a port routing by LID: %v %s", port.LID, r.h.Code, r.msg())
			}
			if !tc.byLID && (r.h.Code != proto.CodeAttr || !strings.Contains(r.msg(), "--lid-routing")) {
				t.Errorf("modify_qp to RTR by LID 0x%x alone: %v %q, want CodeAttr naming --lid-routing", port.LID, r.h.Code, r.msg())
			}
			if r, _ := rcToLID(t, c, qpstate.AddressVector{PortNum: 1}); r.h.Code != proto.CodeAttr {
				t.Errorf("modify_qp to RTR with neither GID nor LID: %v %q, want CodeAttr", r.h.Code, r.msg())
			}
		})
	}
}
