package daemon_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// createSRQ makes an SRQ of maxWR requests of one scatter entry and
// returns its reply and its ring's memfd (the caller closes it).
func createSRQ(t *testing.T, c *rawClient, maxWR int) (proto.CreateSRQResp, int) {
	t.Helper()
	var pd proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)
	r := c.call(proto.OpCreateSRQ, mustJSON(proto.CreateSRQReq{PD: pd.Handle, MaxWR: maxWR, MaxSGE: 1}))
	var srq proto.CreateSRQResp
	if err := json.Unmarshal(r.body, &srq); err != nil || r.h.Code != proto.CodeOK || len(r.fds) != 1 {
		proto.CloseFDs(r.fds)
		t.Fatalf("create_srq: %v %s", err, r.msg())
	}
	return srq, r.fds[0]
}

// TestHostileModifySRQRefused: a library that asks for absurd sizes or
// limits, names an SRQ it does not own, or wrote junk into the SRQ ring's
// producer index before a resize gets a refusal that says what was wrong,
// the SRQ keeps its ring and limit, and the daemon stays up.
func TestHostileModifySRQRefused(t *testing.T) {
	sock := daemontest.Start(t)
	c := dial(t, sock)
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	srq, fd := createSRQ(t, c, 16)
	defer unix.Close(fd)
	h := srq.Handle
	c.ok(proto.OpModifySRQ, proto.ModifySRQReq{Handle: h, Mask: proto.SRQLimit, Limit: 4}, nil)
	for _, tc := range []struct {
		name string
		req  any
		code proto.Code
		want string
	}{
		{"unknown mask bit", proto.ModifySRQReq{Handle: h, Mask: 4}, proto.CodeInvalid, "only IBV_SRQ_MAX_WR"},
		{"negative mask", proto.ModifySRQReq{Handle: h, Mask: -1}, proto.CodeInvalid, "only IBV_SRQ_MAX_WR"},
		{"max_wr 0", proto.ModifySRQReq{Handle: h, Mask: proto.SRQMaxWR}, proto.CodeInvalid, "max_wr 0"},
		{"max_wr past the device's", proto.ModifySRQReq{Handle: h, Mask: proto.SRQMaxWR, MaxWR: engine.MaxQPWR + 1}, proto.CodeInvalid, "must be 1.."},
		{"max_wr 2^62", map[string]any{"handle": h, "mask": 1, "max_wr": int64(1) << 62}, proto.CodeInvalid, "must be 1.."},
		{"max_wr below the limit", proto.ModifySRQReq{Handle: h, Mask: proto.SRQMaxWR, MaxWR: 3}, proto.CodeInvalid, "srq_limit 4 above max_wr 3"},
		{"limit above the size", proto.ModifySRQReq{Handle: h, Mask: proto.SRQLimit, Limit: 17}, proto.CodeInvalid, "srq_limit 17 above max_wr 16"},
		{"limit above the new size", proto.ModifySRQReq{Handle: h, Mask: proto.SRQMaxWR | proto.SRQLimit, MaxWR: 8, Limit: 9}, proto.CodeInvalid, "srq_limit 9 above max_wr 8"},
		{"negative limit", proto.ModifySRQReq{Handle: h, Mask: proto.SRQLimit, Limit: -1}, proto.CodeInvalid, "srq_limit -1"},
		{"another handle", proto.ModifySRQReq{Handle: h + 1000, Mask: proto.SRQLimit, Limit: 1}, proto.CodeNotFound, "no shared receive queue with handle"},
		{"a string for max_wr", map[string]any{"handle": h, "mask": 1, "max_wr": "lots"}, proto.CodeInvalid, "malformed command body"},
	} {
		t.Run(tc.name, func(t *testing.T) { c.fails(proto.OpModifySRQ, tc.req, tc.code, tc.want) })
	}
	// Junk in the producer index: more posted than the ring holds.
	mem, err := unix.Mmap(fd, 0, srq.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := range mem[abi.RingHeaderSize:] {
		mem[abi.RingHeaderSize+i] = 0xa5 // junk requests, too
	}
	shm.Store32(mem, srq.Ring.Offset+abi.RingProdOff, 0xdeadbeef)
	c.fails(proto.OpModifySRQ, proto.ModifySRQReq{Handle: h, Mask: proto.SRQMaxWR, MaxWR: 64}, proto.CodeInvalid, "the library wrote its producer index wrong")
	var q proto.ModifySRQResp
	c.ok(proto.OpQuerySRQ, proto.HandleReq{Handle: h}, &q)
	if q.MaxWR != 16 || q.Limit != 4 {
		t.Fatalf("after the refusals: %+v, want max_wr 16 and srq_limit 4", q)
	}
	// Junk requests under a sane producer index are copied, not parsed: the
	// resize goes through and hands one ring of the new size.
	shm.Store32(mem, srq.Ring.Offset+abi.RingProdOff, 5)
	r := c.call(proto.OpModifySRQ, mustJSON(proto.ModifySRQReq{Handle: h, Mask: proto.SRQMaxWR, MaxWR: 100}))
	defer proto.CloseFDs(r.fds)
	if err := json.Unmarshal(r.body, &q); err != nil || r.h.Code != proto.CodeOK || len(r.fds) != 1 {
		t.Fatalf("modify_srq to 100: %v %s (%d fds)", err, r.msg(), len(r.fds))
	}
	if q.MaxWR != 128 || q.Limit != 4 || q.Ring.Entries != 128 || q.Size != q.Ring.Offset+abi.RingHeaderSize+128*q.Ring.Stride {
		t.Fatalf("modify_srq to 100: %+v, want 128 entries and the limit kept", q)
	}
	var st unix.Stat_t
	if err := unix.Fstat(r.fds[0], &st); err != nil || st.Size != int64(q.Size) {
		t.Fatalf("the new ring's memfd: %v, %d bytes, want %d", err, st.Size, q.Size)
	}
	checkAlive(t, sock)
}

// TestModifySRQCharged: the ring a resize makes is charged to the tenant in
// place of the old one; a resize past the tenant's ring limit (both rings
// exist while the requests move) is refused with CodeLimit, leaving the
// SRQ and the charge as they were; destroying the SRQ gives back what its
// last ring took.
func TestModifySRQCharged(t *testing.T) {
	limit := engine.SRQBytes(1024, 1)
	d := daemontest.StartWith(t, func(cfg *daemon.Config) {
		cfg.UserLimits = daemon.Limits{daemon.Ring: limit}
	})
	uid := uint32(os.Geteuid())
	c := dial(t, d.SocketPath())
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	srq, fd := createSRQ(t, c, 16)
	unix.Close(fd)
	held := map[string]uint64{"session": 1, "pd": 1, "srq": 1, "ring": engine.SRQBytes(16, 1)}
	waitUsage(t, d, uid, held)
	for _, tc := range []struct {
		maxWR int
		code  proto.Code
		ring  uint64 // charged afterwards
	}{
		{512, proto.CodeOK, engine.SRQBytes(512, 1)},
		{1024, proto.CodeLimit, engine.SRQBytes(512, 1)},
		{8, proto.CodeOK, engine.SRQBytes(8, 1)},
		{1024, proto.CodeLimit, engine.SRQBytes(8, 1)},
		{300, proto.CodeOK, engine.SRQBytes(512, 1)},
		{engine.MaxQPWR + 1, proto.CodeInvalid, engine.SRQBytes(512, 1)},
	} {
		r := c.call(proto.OpModifySRQ, mustJSON(proto.ModifySRQReq{Handle: srq.Handle, Mask: proto.SRQMaxWR, MaxWR: tc.maxWR}))
		proto.CloseFDs(r.fds)
		if r.h.Code != tc.code {
			t.Fatalf("resize to %d: %v %s, want %v", tc.maxWR, r.h.Code, r.msg(), tc.code)
		}
		held["ring"] = tc.ring
		waitUsage(t, d, uid, held)
	}
	c.ok(proto.OpDestroySRQ, proto.HandleReq{Handle: srq.Handle}, nil)
	delete(held, "srq")
	delete(held, "ring")
	waitUsage(t, d, uid, held)
}
