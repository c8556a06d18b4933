package daemon_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// largestQP asks for the most a QP may have: engine.MaxQPWR send and
// receive requests of engine.MaxSGE scatter/gather entries and
// engine.MaxInline bytes inline.
var largestQP = proto.QPCaps{MaxSendWR: engine.MaxQPWR, MaxRecvWR: engine.MaxQPWR,
	MaxSendSGE: engine.MaxSGE, MaxRecvSGE: engine.MaxSGE, MaxInlineData: engine.MaxInline}

// TestRingLimit: every byte a tenant's queues make the daemon allocate
// (their shared rings and its own state of them) counts against the ring
// limit of its uid, its instance and all tenants together. A QP, CQ or
// SRQ past it is refused with CodeLimit naming the limit and the flag that
// raises it; query_device advertises it; destroying a queue or ending the
// session gives the bytes back. (Before, a uid within every quota had 446
// QPs of 16,384 requests take 7.1 GiB, counted against nothing.)
func TestRingLimit(t *testing.T) {
	qpBytes, err := engine.QPBytes(largestQP, false)
	if err != nil {
		t.Fatal(err)
	}
	cqBytes := engine.CQBytes(engine.MaxCQE)
	srqBytes := engine.SRQBytes(engine.MaxQPWR, engine.MaxSGE)
	limit := cqBytes + 3*qpBytes + min(cqBytes, qpBytes, srqBytes)/2 // a CQ and three of the largest QPs fit, and no more queue of the largest
	for _, tc := range []struct {
		name, instance, flag string
		cfg                  func(c *daemon.Config)
	}{
		{"uid", "", "--limit ring=BYTES", func(c *daemon.Config) { c.UserLimits = daemon.Limits{daemon.Ring: limit} }},
		{"instance", "vm", "--instance-limit ring=BYTES", func(c *daemon.Config) { c.InstanceLimits = daemon.Limits{daemon.Ring: limit} }},
		{"total", "", "--total-limit ring=BYTES", func(c *daemon.Config) {
			c.UserLimits = daemon.Limits{daemon.Ring: daemon.Unlimited}
			c.TotalLimits = daemon.Limits{daemon.Ring: limit}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := daemontest.StartWith(t, tc.cfg)
			uid := uint32(os.Geteuid())
			if tc.instance != "" {
				adm := dial(t, d.SocketPath())
				adm.ok(proto.OpHello, proto.HelloReq{}, nil)
				adm.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: tc.instance, Adapters: 1}, nil)
			}
			c := dial(t, d.SocketPath())
			c.ok(proto.OpHello, proto.HelloReq{Instance: tc.instance, Device: "vrdma0"}, nil)
			var attr proto.DeviceAttr
			c.ok(proto.OpQueryDevice, nil, &attr)
			if attr.MaxRingBytes != limit {
				t.Errorf("max_ring_bytes %d, want the limit %d", attr.MaxRingBytes, limit)
			}
			var pd proto.HandleResp
			c.ok(proto.OpAllocPD, nil, &pd)
			var cq proto.CreateCQResp
			r := c.call(proto.OpCreateCQ, mustJSON(proto.CreateCQReq{CQE: engine.MaxCQE}))
			proto.CloseFDs(r.fds)
			if r.h.Code != proto.CodeOK || json.Unmarshal(r.body, &cq) != nil {
				t.Fatalf("a CQ of %d: %v %s", engine.MaxCQE, r.h.Code, r.msg())
			}
			createQP := func() reply {
				r := c.call(proto.OpCreateQP, mustJSON(proto.CreateQPReq{PD: pd.Handle, Type: uint8(abi.QPTypeRC), SendCQ: cq.Handle, RecvCQ: cq.Handle, Caps: largestQP}))
				proto.CloseFDs(r.fds)
				return r
			}
			var qps []uint32
			for i := range 3 {
				r := createQP()
				var q proto.CreateQPResp
				if r.h.Code != proto.CodeOK || json.Unmarshal(r.body, &q) != nil {
					t.Fatalf("QP %d of the 3 that fit: %v %s", i+1, r.h.Code, r.msg())
				}
				qps = append(qps, q.Handle)
			}
			if got := d.UsedBy(uid)["ring"]; got != cqBytes+3*qpBytes {
				t.Errorf("uid %d is charged %d ring bytes, want %d", uid, got, cqBytes+3*qpBytes)
			}
			r = createQP()
			if r.h.Code != proto.CodeLimit || !strings.Contains(r.msg(), fmt.Sprintf("limit ring=%d", limit)) || !strings.Contains(r.msg(), tc.flag) {
				t.Fatalf("a 4th QP past the ring limit: %v %q; want CodeLimit naming ring=%d and %s", r.h.Code, r.msg(), limit, tc.flag)
			}
			// A CQ and an SRQ are charged too.
			if r := c.call(proto.OpCreateCQ, mustJSON(proto.CreateCQReq{CQE: engine.MaxCQE})); r.h.Code != proto.CodeLimit {
				proto.CloseFDs(r.fds)
				t.Errorf("a CQ of %d bytes past the ring limit: %v %s", cqBytes, r.h.Code, r.msg())
			}
			if r := c.call(proto.OpCreateSRQ, mustJSON(proto.CreateSRQReq{PD: pd.Handle, MaxWR: engine.MaxQPWR, MaxSGE: engine.MaxSGE})); r.h.Code != proto.CodeLimit {
				proto.CloseFDs(r.fds)
				t.Errorf("an SRQ of %d bytes past the ring limit: %v %s", srqBytes, r.h.Code, r.msg())
			}
			// Destroying one gives its bytes back.
			c.ok(proto.OpDestroyQP, proto.HandleReq{Handle: qps[0]}, nil)
			if r := createQP(); r.h.Code != proto.CodeOK {
				t.Fatalf("a QP after one was destroyed: %v %s", r.h.Code, r.msg())
			}
			// Ending the session gives everything back.
			c.Close()
			deadline := time.Now().Add(10 * time.Second) // hang guard: sessions end asynchronously
			for d.UsedBy(uid)["ring"] != 0 || d.TotalUsage()["ring"] != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("after the session ended, uid %d holds %v, all tenants %v", uid, d.UsedBy(uid), d.TotalUsage())
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}
