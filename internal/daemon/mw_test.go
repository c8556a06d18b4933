package daemon_test

import (
	"os"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestMemoryWindowCommands: alloc_mw gives a window of type 1 or 2 its
// handle and rkey, charged to the tenant's mw limit, which query_device
// reports as max_mw; past the limit, with another type or PD it is refused
// with a message; dealloc_mw gives the charge back, and a PD with a window
// cannot be deallocated.
func TestMemoryWindowCommands(t *testing.T) {
	d := daemontest.StartWith(t, func(cfg *daemon.Config) {
		cfg.UserLimits = daemon.Limits{daemon.MWs: 2}
	})
	uid := uint32(os.Geteuid())
	c := dial(t, d.SocketPath())
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	var attr proto.DeviceAttr
	c.ok(proto.OpQueryDevice, nil, &attr)
	if attr.MaxMW != 2 {
		t.Errorf("max_mw %d, want the tenant's limit 2", attr.MaxMW)
	}
	var pd proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)
	var w1, w2 proto.AllocMWResp
	c.ok(proto.OpAllocMW, proto.AllocMWReq{PD: pd.Handle, Type: 1}, &w1)
	c.ok(proto.OpAllocMW, proto.AllocMWReq{PD: pd.Handle, Type: 2}, &w2)
	if w1.RKey == 0 || w2.RKey == 0 || w1.RKey == w2.RKey || w1.Handle == w2.Handle {
		t.Fatalf("windows %+v and %+v", w1, w2)
	}
	waitUsage(t, d, uid, map[string]uint64{"session": 1, "pd": 1, "mw": 2})
	for _, tc := range []struct {
		name string
		op   proto.Op
		req  any
		code proto.Code
		want string
	}{
		{"past the limit", proto.OpAllocMW, proto.AllocMWReq{PD: pd.Handle, Type: 1}, proto.CodeLimit, "memory windows (mw)"},
		{"type 3", proto.OpAllocMW, proto.AllocMWReq{PD: pd.Handle, Type: 3}, proto.CodeInvalid, "the types are 1"},
		{"another PD", proto.OpAllocMW, proto.AllocMWReq{PD: 999, Type: 1}, proto.CodeNotFound, "protection domain"},
		{"the PD of a window", proto.OpDeallocPD, proto.HandleReq(pd), proto.CodeBusy, "memory windows"},
		{"no such window", proto.OpDeallocMW, proto.HandleReq{Handle: 999}, proto.CodeNotFound, "memory window"},
	} {
		r := c.call(tc.op, mustJSON(tc.req))
		if r.h.Code != tc.code || !strings.Contains(r.msg(), tc.want) {
			t.Errorf("%s: %v %q, want %v and %q", tc.name, r.h.Code, r.msg(), tc.code, tc.want)
		}
	}
	c.ok(proto.OpDeallocMW, proto.HandleReq{Handle: w1.Handle}, nil)
	waitUsage(t, d, uid, map[string]uint64{"session": 1, "pd": 1, "mw": 1})
	var w3 proto.AllocMWResp
	c.ok(proto.OpAllocMW, proto.AllocMWReq{PD: pd.Handle, Type: 1}, &w3)
	if r := c.call(proto.OpDeallocMW, mustJSON(proto.HandleReq{Handle: w1.Handle})); r.h.Code != proto.CodeNotFound {
		t.Errorf("a second dealloc_mw: %v %q, want NOT_FOUND", r.h.Code, r.msg())
	}
}
