package daemon_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestReregMR: rereg_mr keeps the region's handle and keys and moves its
// locked-memory charge to the new memory; what the library may send wrong
// (another handle, no memory, a bad access, too many or too few
// descriptors, more than the tenant may lock) is refused with a message
// and leaves the region, its keys and its charge as they were.
func TestReregMR(t *testing.T) {
	d := daemontest.StartWith(t, func(cfg *daemon.Config) {
		cfg.UserLimits = daemon.Limits{daemon.Locked: 5 * 4096}
	})
	uid := uint32(os.Geteuid())
	c := dial(t, d.SocketPath())
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	var pd, pd2 proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)
	c.ok(proto.OpAllocPD, nil, &pd2)
	r := c.call(proto.OpRegMR, mustJSON(proto.RegMRReq{PD: pd.Handle, Addr: 0x10000, Length: 4096, Access: uint32(abi.AccessLocalWrite)}), memfd(t, 4096, true))
	var mr proto.RegMRResp
	if r.h.Code != proto.CodeOK || json.Unmarshal(r.body, &mr) != nil {
		t.Fatalf("reg_mr: %v %s", r.h.Code, r.msg())
	}
	held := map[string]uint64{"session": 1, "pd": 2, "mr": 1, "locked": 4096}
	waitUsage(t, d, uid, held)
	rereg := func(h uint32, req proto.RegMRReq) proto.ReregMRReq { return proto.ReregMRReq{Handle: h, RegMRReq: req} }
	good := proto.RegMRReq{PD: pd2.Handle, Addr: 0x20000, Length: 3 * 4096, Access: uint32(abi.AccessLocalWrite | abi.AccessRemoteWrite)}
	for _, tc := range []struct {
		name string
		req  proto.ReregMRReq
		fds  []int
		code proto.Code
		want string
	}{
		{"another handle", rereg(mr.Handle+100, good), []int{memfd(t, 3*4096, true)}, proto.CodeNotFound, "no memory region with handle"},
		{"no length", rereg(mr.Handle, proto.RegMRReq{PD: pd.Handle, Addr: 0x20000, Access: 1}), []int{memfd(t, 4096, true)}, proto.CodeInvalid, "length 0"},
		{"remote write without local write", rereg(mr.Handle, proto.RegMRReq{PD: pd.Handle, Addr: 0x20000, Length: 4096, Access: uint32(abi.AccessRemoteWrite)}), []int{memfd(t, 4096, true)}, proto.CodeInvalid, "LOCAL_WRITE"},
		{"no descriptor", rereg(mr.Handle, good), nil, proto.CodeInvalid, "exactly one memfd"},
		{"two descriptors", rereg(mr.Handle, good), []int{memfd(t, 3*4096, true), memfd(t, 4096, true)}, proto.CodeInvalid, "exactly one memfd"},
		{"another PD handle", rereg(mr.Handle, proto.RegMRReq{PD: 999, Addr: 0x20000, Length: 4096, Access: 1}), []int{memfd(t, 4096, true)}, proto.CodeNotFound, "no protection domain"},
		{"past the locked limit", rereg(mr.Handle, proto.RegMRReq{PD: pd.Handle, Addr: 0x20000, Length: 5 * 4096, Access: 1}), []int{memfd(t, 5*4096, true)}, proto.CodeLimit, "locked"},
	} {
		r := c.call(proto.OpReregMR, mustJSON(tc.req), tc.fds...)
		proto.CloseFDs(r.fds)
		if r.h.Code != tc.code || !strings.Contains(r.msg(), tc.want) {
			t.Errorf("%s: %v %q, want %v and %q", tc.name, r.h.Code, r.msg(), tc.code, tc.want)
		}
		waitUsage(t, d, uid, held)
	}
	r = c.call(proto.OpReregMR, mustJSON(rereg(mr.Handle, good)), memfd(t, 3*4096, true))
	var got proto.RegMRResp
	if r.h.Code != proto.CodeOK || json.Unmarshal(r.body, &got) != nil {
		t.Fatalf("rereg_mr: %v %s", r.h.Code, r.msg())
	}
	if got != mr {
		t.Fatalf("rereg_mr answered %+v, want the region's handle and keys %+v", got, mr)
	}
	held["locked"] = 3 * 4096
	waitUsage(t, d, uid, held)
	// The old PD is free now, the new one holds the region.
	c.ok(proto.OpDeallocPD, proto.HandleReq(pd), nil)
	r = c.call(proto.OpDeallocPD, mustJSON(proto.HandleReq(pd2)))
	if r.h.Code != proto.CodeBusy {
		t.Fatalf("dealloc_pd of the region's new PD: %v %s", r.h.Code, r.msg())
	}
	c.ok(proto.OpDeregMR, proto.HandleReq{Handle: mr.Handle}, nil)
	waitUsage(t, d, uid, map[string]uint64{"session": 1, "pd": 1})
}
