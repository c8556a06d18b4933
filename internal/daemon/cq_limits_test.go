package daemon_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// libfabricCQE is the CQ libfabric's RDM endpoint (verbs;ofi_rxm) asks for.
const libfabricCQE = 262144

// TestBigCQCharged: a CQ as large as real devices take (libfabric's RDM
// endpoint asks for 262,144 completions; the daemon once refused anything
// above 65,536) is created, advertised in max_cqe, and its whole ring is
// charged to the tenant; a tenant whose ring limit cannot afford it is
// refused with CodeLimit naming the limit; a size past max_cqe, or one a
// hostile library makes up, is refused with CodeInvalid naming the range.
func TestBigCQCharged(t *testing.T) {
	bytes := engine.CQBytes(libfabricCQE)
	if bytes < libfabricCQE*32 {
		t.Fatalf("CQBytes(%d) = %d: less than its entries", libfabricCQE, bytes)
	}
	for _, tc := range []struct {
		name  string
		limit uint64 // the uid's ring limit
		ok    bool
	}{
		{"affordable", bytes, true},
		{"one byte short", bytes - 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := daemontest.StartWith(t, func(c *daemon.Config) { c.UserLimits = daemon.Limits{daemon.Ring: tc.limit} })
			uid := uint32(os.Geteuid())
			c := dial(t, d.SocketPath())
			c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
			var attr proto.DeviceAttr
			c.ok(proto.OpQueryDevice, nil, &attr)
			if attr.MaxCQE < libfabricCQE {
				t.Errorf("max_cqe %d: below the %d libfabric asks for", attr.MaxCQE, libfabricCQE)
			}
			r := c.call(proto.OpCreateCQ, mustJSON(proto.CreateCQReq{CQE: libfabricCQE}))
			proto.CloseFDs(r.fds)
			if !tc.ok {
				if r.h.Code != proto.CodeLimit || !strings.Contains(r.msg(), fmt.Sprintf("limit ring=%d", tc.limit)) {
					t.Fatalf("a CQ of %d bytes past a ring limit of %d: %v %q, want CodeLimit naming the limit", bytes, tc.limit, r.h.Code, r.msg())
				}
				if got := d.UsedBy(uid)["ring"]; got != 0 {
					t.Errorf("the refused CQ left %d ring bytes charged", got)
				}
				return
			}
			var cq proto.CreateCQResp
			if r.h.Code != proto.CodeOK || json.Unmarshal(r.body, &cq) != nil {
				t.Fatalf("a CQ of %d: %v %s", libfabricCQE, r.h.Code, r.msg())
			}
			if cq.CQE < libfabricCQE || uint64(cq.Size) > bytes {
				t.Errorf("a CQ of %d: got %d entries in %d bytes, charged %d", libfabricCQE, cq.CQE, cq.Size, bytes)
			}
			if got := d.UsedBy(uid)["ring"]; got != bytes {
				t.Errorf("uid %d is charged %d ring bytes for the CQ, want %d", uid, got, bytes)
			}
			c.ok(proto.OpDestroyCQ, proto.HandleReq{Handle: cq.Handle}, nil)
			if got := d.UsedBy(uid)["ring"]; got != 0 {
				t.Errorf("after the CQ was destroyed uid %d is charged %d ring bytes", uid, got)
			}
		})
	}
	t.Run("out of range", func(t *testing.T) {
		d := daemontest.StartWith(t, func(c *daemon.Config) { c.UserLimits = daemon.Limits{daemon.Ring: daemon.Unlimited} })
		c := dial(t, d.SocketPath())
		c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
		for _, cqe := range []int{0, -1, engine.MaxCQE + 1, 1 << 40, math.MaxInt, math.MinInt} {
			r := c.call(proto.OpCreateCQ, mustJSON(proto.CreateCQReq{CQE: cqe}))
			proto.CloseFDs(r.fds)
			if r.h.Code != proto.CodeInvalid || !strings.Contains(r.msg(), fmt.Sprintf("1 to %d", engine.MaxCQE)) {
				t.Errorf("cqe %d: %v %q, want CodeInvalid naming 1 to %d", cqe, r.h.Code, r.msg(), engine.MaxCQE)
			}
		}
	})
}
