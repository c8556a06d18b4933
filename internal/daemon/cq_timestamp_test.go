package daemon_test

import (
	"encoding/json"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// TestCreateCQTimestamps: create_cq with "timestamps" makes a ring of
// abi.CQETSSize-byte entries and says so in the reply's stride, its memfd
// that size; without it the entries stay abi.CQESize bytes; a resize of a
// timestamped CQ keeps its stride (its size is the timestamped one's).
func TestCreateCQTimestamps(t *testing.T) {
	sock := daemontest.Start(t)
	c := dial(t, sock)
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	for _, tc := range []struct {
		name   string
		ts     bool
		stride int
		bytes  func(int) uint64
	}{
		{"ordinary", false, abi.CQESize, engine.CQBytes},
		{"timestamped", true, abi.CQETSSize, engine.TimestampedCQBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.call(proto.OpCreateCQ, mustJSON(proto.CreateCQReq{CQE: 16, Timestamps: tc.ts}))
			defer proto.CloseFDs(r.fds)
			var cq proto.CreateCQResp
			if err := json.Unmarshal(r.body, &cq); err != nil || r.h.Code != proto.CodeOK || len(r.fds) != 3 {
				t.Fatalf("create_cq: %v %s (%d fds)", err, r.msg(), len(r.fds))
			}
			if cq.Stride != tc.stride || cq.Entries != 16 || cq.Size != int(tc.bytes(16)) {
				t.Fatalf("create_cq: %+v, want 16 entries of %d bytes in %d", cq, tc.stride, tc.bytes(16))
			}
			var st unix.Stat_t
			if err := unix.Fstat(r.fds[0], &st); err != nil || st.Size != int64(cq.Size) {
				t.Fatalf("the ring's memfd: %v, %d bytes, want %d", err, st.Size, cq.Size)
			}
			rr := c.call(proto.OpResizeCQ, mustJSON(proto.ResizeCQReq{Handle: cq.Handle, CQE: 100}))
			defer proto.CloseFDs(rr.fds)
			var resized proto.ResizeCQResp
			if err := json.Unmarshal(rr.body, &resized); err != nil || rr.h.Code != proto.CodeOK || len(rr.fds) != 1 {
				t.Fatalf("resize_cq: %v %s", err, rr.msg())
			}
			if resized.Entries != 128 || resized.Size != int(tc.bytes(100)) {
				t.Fatalf("resize_cq to 100: %+v, want 128 entries in %d bytes", resized, tc.bytes(100))
			}
		})
	}
	checkAlive(t, sock)
}
