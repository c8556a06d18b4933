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

// TestRegMRAtOffsetChargesWhatIsMapped: a region at an offset of its memfd
// costs the bytes the daemon maps and locks for it, the pages that hold it
// from the page of its offset on; deregistration gives them back, and the
// limit on locked memory binds on them.
func TestRegMRAtOffsetChargesWhatIsMapped(t *testing.T) {
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

	tests := []struct {
		name           string
		memfd          uint64
		offset, length uint64
		charge         uint64
	}{
		{"offset 0", page, 0, 1000, 1000},
		{"inside the first page", page, 100, 1000, 1100},
		{"inside a later page", 3 * page, 2*page + 100, 1000, 1100},
		{"across pages", 3 * page, page - 8, page, page + page - 8},
		{"whole pages", 4 * page, page, 2 * page, 2 * page},
		{"up to the limit", limit + page, page + 1, limit - 1, limit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := proto.RegMRReq{PD: pd.Handle, Addr: 0x7f0000000000 + tt.offset, Length: tt.length, Offset: tt.offset,
				Access: uint32(abi.AccessLocalWrite | abi.AccessRemoteWrite)}
			r := c.call(proto.OpRegMR, mustJSON(req), memfd(t, int(tt.memfd), true))
			if r.h.Code != proto.CodeOK {
				t.Fatalf("reg_mr: %v %s", r.h.Code, r.msg())
			}
			if got := d.TotalUsage()["locked"]; got != tt.charge {
				t.Errorf("the daemon counts %d bytes locked, want %d", got, tt.charge)
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
	// One byte past the limit, from the part of the first page before the
	// region.
	req := proto.RegMRReq{PD: pd.Handle, Addr: 0x7f0000000000 + page + 2, Length: limit - 1, Offset: page + 2, Access: uint32(abi.AccessLocalWrite)}
	if r := c.call(proto.OpRegMR, mustJSON(req), memfd(t, int(limit+page+page), true)); r.h.Code != proto.CodeLimit {
		t.Fatalf("a region whose mapping is one byte above the limit: %v %q, want %v", r.h.Code, r.msg(), proto.CodeLimit)
	}
	if got := d.TotalUsage()["locked"]; got != 0 {
		t.Errorf("a refused registration left %d bytes counted", got)
	}
}

// TestRegMRChargesBeforeMapping: a registration the tenant may not lock is
// refused on its declared size, before the daemon maps its memfd. Mapping
// first let a tenant at its limit have the daemon map up to 1 TiB of a
// sparse memfd per request (any number of sessions at once) before the
// refusal. Here the memfd is too short for the range, so a daemon that
// maps first answers that instead of the limit.
func TestRegMRChargesBeforeMapping(t *testing.T) {
	page := uint64(os.Getpagesize())
	const limit = 1 << 20
	d := daemontest.StartWith(t, func(c *daemon.Config) {
		c.UserLimits = daemon.Limits{daemon.Locked: limit}
	})
	c := dial(t, d.SocketPath())
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "daemon-test"}, nil)
	var pd proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)
	for _, tt := range []struct {
		name           string
		offset, length uint64
	}{
		{"a region above the limit", 0, 1 << 40},
		{"a region one byte above the limit with the start of its page", page - 1, limit - page + 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := proto.RegMRReq{PD: pd.Handle, Addr: 0x7f0000000000 + tt.offset, Length: tt.length, Offset: tt.offset,
				Access: uint32(abi.AccessLocalWrite)}
			r := c.call(proto.OpRegMR, mustJSON(req), memfd(t, int(page), true))
			if r.h.Code != proto.CodeLimit {
				t.Fatalf("reg_mr of %d bytes at offset %d over a locked limit of %d: %v %q, want %v before the memfd is mapped",
					tt.length, tt.offset, limit, r.h.Code, r.msg(), proto.CodeLimit)
			}
			if got := d.TotalUsage()["locked"]; got != 0 {
				t.Errorf("a refused registration left %d bytes counted", got)
			}
		})
	}
}
