package daemon_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// TestHostileResizeCQRefused: a library that asks the daemon to resize a
// CQ to an absurd size, one it does not own or with a broken body, gets a
// refusal that says what was wrong, and the daemon stays up.
func TestHostileResizeCQRefused(t *testing.T) {
	sock := daemontest.Start(t)
	c := dial(t, sock)
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	var cq proto.CreateCQResp
	r := c.call(proto.OpCreateCQ, mustJSON(proto.CreateCQReq{CQE: 16}))
	proto.CloseFDs(r.fds)
	if err := json.Unmarshal(r.body, &cq); err != nil || r.h.Code != proto.CodeOK {
		t.Fatalf("create_cq: %v %s", err, r.msg())
	}
	for _, tc := range []struct {
		name string
		req  any
		code proto.Code
		want string
	}{
		{"2^31-1 entries", proto.ResizeCQReq{Handle: cq.Handle, CQE: 1<<31 - 1}, proto.CodeInvalid, "a CQ holds 1 to"},
		{"2^62 entries", map[string]any{"handle": cq.Handle, "cqe": int64(1) << 62}, proto.CodeInvalid, "a CQ holds 1 to"},
		{"one past the maximum", proto.ResizeCQReq{Handle: cq.Handle, CQE: engine.MaxCQE + 1}, proto.CodeInvalid, "a CQ holds 1 to"},
		{"zero", proto.ResizeCQReq{Handle: cq.Handle, CQE: 0}, proto.CodeInvalid, "cqe 0"},
		{"negative", proto.ResizeCQReq{Handle: cq.Handle, CQE: -1}, proto.CodeInvalid, "cqe -1"},
		{"another handle", proto.ResizeCQReq{Handle: cq.Handle + 1000, CQE: 64}, proto.CodeNotFound, "no completion queue with handle"},
		{"a string for cqe", map[string]any{"handle": cq.Handle, "cqe": "lots"}, proto.CodeInvalid, "malformed command body"},
	} {
		t.Run(tc.name, func(t *testing.T) { c.fails(proto.OpResizeCQ, tc.req, tc.code, tc.want) })
	}
	// The CQ still works: a real resize goes through and hands one ring.
	r = c.call(proto.OpResizeCQ, mustJSON(proto.ResizeCQReq{Handle: cq.Handle, CQE: 100}))
	defer proto.CloseFDs(r.fds)
	var rr proto.ResizeCQResp
	if err := json.Unmarshal(r.body, &rr); err != nil || r.h.Code != proto.CodeOK || len(r.fds) != 1 {
		t.Fatalf("resize_cq to 100: %v %s (%d fds)", err, r.msg(), len(r.fds))
	}
	if rr.CQE != 128 || rr.Entries != 128 || rr.Size != int(engine.CQBytes(100)) {
		t.Fatalf("resize_cq to 100: %+v, want 128 entries in %d bytes", rr, engine.CQBytes(100))
	}
	var st unix.Stat_t
	if err := unix.Fstat(r.fds[0], &st); err != nil || st.Size != int64(rr.Size) {
		t.Fatalf("the new ring's memfd: %v, %d bytes, want %d", err, st.Size, rr.Size)
	}
	checkAlive(t, sock)
}

// TestResizeCQCharged: the ring a resize makes is charged to the tenant in
// place of the old one, and a resize past the tenant's ring limit (the
// old ring and the new, which both exist while the completions move) is
// refused with CodeLimit, leaving the CQ and the charge as they were.
func TestResizeCQCharged(t *testing.T) {
	limit := engine.CQBytes(1024)
	d := daemontest.StartWith(t, func(cfg *daemon.Config) {
		cfg.UserLimits = daemon.Limits{daemon.Ring: limit}
	})
	uid := uint32(os.Geteuid())
	c := dial(t, d.SocketPath())
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	r := c.call(proto.OpCreateCQ, mustJSON(proto.CreateCQReq{CQE: 16}))
	proto.CloseFDs(r.fds)
	var cq proto.CreateCQResp
	if err := json.Unmarshal(r.body, &cq); err != nil || r.h.Code != proto.CodeOK {
		t.Fatalf("create_cq: %v %s", err, r.msg())
	}
	held := map[string]uint64{"session": 1, "cq": 1, "ring": engine.CQBytes(16)}
	waitUsage(t, d, uid, held)
	for _, tc := range []struct {
		cqe  int
		code proto.Code
		ring uint64 // charged afterwards
	}{
		{512, proto.CodeOK, engine.CQBytes(512)},
		{1024, proto.CodeLimit, engine.CQBytes(512)}, // the old ring and the new one together pass the limit
		{8, proto.CodeOK, engine.CQBytes(8)},
		{1024, proto.CodeLimit, engine.CQBytes(8)}, // even from a small ring: both exist while the completions move
		{300, proto.CodeOK, engine.CQBytes(512)},
		{engine.MaxCQE + 1, proto.CodeInvalid, engine.CQBytes(512)}, // past the device's max_cqe
	} {
		r := c.call(proto.OpResizeCQ, mustJSON(proto.ResizeCQReq{Handle: cq.Handle, CQE: tc.cqe}))
		proto.CloseFDs(r.fds)
		if r.h.Code != tc.code {
			t.Fatalf("resize to %d: %v %s, want %v", tc.cqe, r.h.Code, r.msg(), tc.code)
		}
		held["ring"] = tc.ring
		waitUsage(t, d, uid, held)
	}
	c.ok(proto.OpDestroyCQ, proto.HandleReq{Handle: cq.Handle}, nil)
	waitUsage(t, d, uid, map[string]uint64{"session": 1})
}
