package daemon_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestOnDemandRegionNotCharged: a region registered with
// IBV_ACCESS_ON_DEMAND is not locked memory (docs/design/odp.md): it is
// neither charged to the locked-memory limit nor refused by it, its
// deregistration gives back nothing, and an ordinary region of the same
// size is still held to the limit.
func TestOnDemandRegionNotCharged(t *testing.T) {
	page := uint64(os.Getpagesize())
	const limit = 1 << 20
	d := daemontest.StartWith(t, func(c *daemon.Config) {
		c.UserLimits = daemon.Limits{daemon.Locked: daemon.Unlimited}
		c.TotalLimits = daemon.Limits{daemon.Locked: limit}
	})
	c := dial(t, d.SocketPath())
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "daemon-test"}, nil)
	var pd proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)
	odp := abi.AccessLocalWrite | abi.AccessOnDemand
	tests := []struct {
		name   string
		length uint64
		access abi.Access
		code   proto.Code
		charge uint64
	}{
		{"on demand, under the limit", limit / 2, odp, proto.CodeOK, 0},
		{"on demand, twice the limit", 2 * limit, odp, proto.CodeOK, 0},
		{"on demand with remote access", 2 * limit, odp | abi.AccessRemoteWrite | abi.AccessRemoteRead | abi.AccessRemoteAtomic, proto.CodeOK, 0},
		{"ordinary, under the limit", limit / 2, abi.AccessLocalWrite, proto.CodeOK, limit / 2},
		{"ordinary, twice the limit", 2 * limit, abi.AccessLocalWrite, proto.CodeLimit, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := proto.RegMRReq{PD: pd.Handle, Addr: 0x7f0000000000, Length: tt.length, Access: uint32(tt.access)}
			r := c.call(proto.OpRegMR, mustJSON(req), memfd(t, int(tt.length+page), true))
			if r.h.Code != tt.code {
				t.Fatalf("reg_mr of %d bytes, access %v: %v %s, want %v", tt.length, tt.access, r.h.Code, r.msg(), tt.code)
			}
			if got := d.TotalUsage()["locked"]; got != tt.charge {
				t.Errorf("the daemon counts %d bytes locked, want %d", got, tt.charge)
			}
			if tt.code != proto.CodeOK {
				return
			}
			var mr proto.RegMRResp
			if err := json.Unmarshal(r.body, &mr); err != nil {
				t.Fatalf("reg_mr reply %s: %v", r.body, err)
			}
			c.ok(proto.OpDeregMR, proto.HandleReq{Handle: mr.Handle}, nil)
			if got := d.TotalUsage()["locked"]; got != 0 {
				t.Errorf("the daemon counts %d bytes locked after dereg_mr, want 0", got)
			}
		})
	}
}
