package daemon_test

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
)

// vmLocked is this process's VmLck in bytes: the in-process daemon's
// locked regions are in it.
func vmLocked(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmLck:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmLck line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmLck line in /proc/self/status")
	return 0
}

// TestOnDemandRegionNotLocked: the daemon maps a region registered with
// IBV_ACCESS_ON_DEMAND without locking it (the process's locked memory
// does not grow; an ordinary region's does by its size), still charges it
// to the tenant's registered-memory limit, which refuses one above it,
// and gives the charge back at deregistration (docs/design/odp.md).
func TestOnDemandRegionNotLocked(t *testing.T) {
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
		locks  bool
	}{
		{"on demand", limit / 2, odp, proto.CodeOK, false},
		{"on demand with remote access", limit / 4, odp | abi.AccessRemoteWrite | abi.AccessRemoteRead | abi.AccessRemoteAtomic, proto.CodeOK, false},
		{"on demand, above the tenant's limit", 2 * limit, odp, proto.CodeLimit, false},
		{"ordinary", limit / 2, abi.AccessLocalWrite, proto.CodeOK, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := vmLocked(t)
			req := proto.RegMRReq{PD: pd.Handle, Addr: 0x7f0000000000, Length: tt.length, Access: uint32(tt.access)}
			r := c.call(proto.OpRegMR, mustJSON(req), memfd(t, int(tt.length+page), true))
			if r.h.Code != tt.code {
				t.Fatalf("reg_mr of %d bytes, access %v: %v %s, want %v", tt.length, tt.access, r.h.Code, r.msg(), tt.code)
			}
			if tt.code != proto.CodeOK {
				if got := d.TotalUsage()["locked"]; got != 0 {
					t.Errorf("a refused registration left %d bytes counted", got)
				}
				return
			}
			if got := d.TotalUsage()["locked"]; got != tt.length {
				t.Errorf("the tenant is charged %d bytes of registered memory, want %d", got, tt.length)
			}
			grew := vmLocked(t) - before
			if want := map[bool]uint64{true: tt.length, false: 0}[tt.locks]; grew != want {
				t.Errorf("the daemon's locked memory grew by %d bytes, want %d", grew, want)
			}
			var mr proto.RegMRResp
			if err := json.Unmarshal(r.body, &mr); err != nil {
				t.Fatalf("reg_mr reply %s: %v", r.body, err)
			}
			c.ok(proto.OpDeregMR, proto.HandleReq{Handle: mr.Handle}, nil)
			if got := d.TotalUsage()["locked"]; got != 0 {
				t.Errorf("%d bytes still charged after dereg_mr", got)
			}
		})
	}
}
