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

// TestRegMRSegments: a registration from several memfds (the guest
// library's, for a range over pages moved by earlier registrations) is
// mapped and charged by its segments' pages when the list is sound, and
// refused with a message that names what is wrong when it lies: about the
// count of descriptors, pages, sizes, the region's place, or seals. A
// refusal closes every descriptor and leaves nothing charged.
func TestRegMRSegments(t *testing.T) {
	page := uint64(os.Getpagesize())
	d := daemontest.StartWith(t, func(c *daemon.Config) {
		c.UserLimits = daemon.Limits{daemon.Locked: daemon.Unlimited}
	})
	c := dial(t, d.SocketPath())
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "daemon-test"}, nil)
	var pd proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)

	type memfdSpec struct {
		size   uint64
		sealed bool
	}
	seg := func(off, n uint64) proto.MRSegment { return proto.MRSegment{Offset: off * page, Length: n * page} }
	sealed := func(pages uint64) memfdSpec { return memfdSpec{pages * page, true} }
	many := make([]proto.MRSegment, proto.MaxMRSegments+1)
	for i := range many {
		many[i] = seg(0, 1)
	}
	tests := []struct {
		name           string
		segs           []proto.MRSegment
		memfds         []memfdSpec
		offset, length uint64
		access         abi.Access
		want           string // "" for success, else a part of the refusal
	}{
		{"one segment", []proto.MRSegment{seg(0, 1)}, []memfdSpec{sealed(1)}, 100, 200, abi.AccessLocalWrite, ""},
		{"two memfds, across their border", []proto.MRSegment{seg(0, 1), seg(0, 1)}, []memfdSpec{sealed(1), sealed(1)}, page - 50, 100, abi.AccessLocalWrite | abi.AccessRemoteWrite, ""},
		{"inside larger memfds", []proto.MRSegment{seg(2, 1), seg(1, 2), seg(0, 1)}, []memfdSpec{sealed(3), sealed(3), sealed(1)}, 10, 3*page + 10, abi.AccessLocalWrite, ""},
		{"read-only", []proto.MRSegment{seg(0, 2)}, []memfdSpec{sealed(2)}, 0, 2 * page, abi.AccessRemoteRead, ""},
		{"a descriptor too few", []proto.MRSegment{seg(0, 1), seg(0, 1)}, []memfdSpec{sealed(1)}, 0, page + 1, abi.AccessLocalWrite, "2 segments but 1 descriptors"},
		{"a descriptor too many", []proto.MRSegment{seg(0, 1)}, []memfdSpec{sealed(1), sealed(1)}, 0, 1, abi.AccessLocalWrite, "1 segments but 2 descriptors"},
		{"too many segments", many, nil, 0, 1, abi.AccessLocalWrite, "at most"},
		{"offset not a page", []proto.MRSegment{{Offset: 100, Length: page}}, []memfdSpec{sealed(2)}, 0, 1, abi.AccessLocalWrite, "whole pages"},
		{"length not pages", []proto.MRSegment{{Offset: 0, Length: page + 1}}, []memfdSpec{sealed(2)}, 0, 1, abi.AccessLocalWrite, "whole pages"},
		{"an empty segment", []proto.MRSegment{seg(0, 1), seg(0, 0)}, []memfdSpec{sealed(1), sealed(1)}, 0, 1, abi.AccessLocalWrite, "whole pages"},
		{"segment past its memfd", []proto.MRSegment{seg(1, 1)}, []memfdSpec{sealed(1)}, 0, 1, abi.AccessLocalWrite, "holds"},
		{"segment overflowing", []proto.MRSegment{{Offset: -page, Length: page}}, []memfdSpec{sealed(1)}, 0, 1, abi.AccessLocalWrite, "overflows"},
		{"lengths overflowing", []proto.MRSegment{{Offset: 0, Length: -page}, {Offset: 0, Length: 2 * page}}, []memfdSpec{sealed(1), sealed(1)}, 0, 1, abi.AccessLocalWrite, "overflows"},
		{"unsealed memfd", []proto.MRSegment{seg(0, 1), seg(0, 1)}, []memfdSpec{sealed(1), {page, false}}, 0, page + 1, abi.AccessLocalWrite, "sealed"},
		{"region past the segments", []proto.MRSegment{seg(0, 1)}, []memfdSpec{sealed(2)}, 100, page, abi.AccessLocalWrite, "must start in the first page"},
		{"region starting after the first page", []proto.MRSegment{seg(0, 2)}, []memfdSpec{sealed(2)}, page, 10, abi.AccessLocalWrite, "must start in the first page"},
		{"a segment the region does not reach", []proto.MRSegment{seg(0, 1), seg(0, 1)}, []memfdSpec{sealed(1), sealed(1)}, 0, 10, abi.AccessLocalWrite, "must start in the first page"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fds []int
			for _, m := range tt.memfds {
				fds = append(fds, memfd(t, int(m.size), m.sealed))
			}
			before := openFDs(t)
			req := proto.RegMRReq{PD: pd.Handle, Addr: 0x7f0000000000 + tt.offset, Length: tt.length, Offset: tt.offset,
				Access: uint32(tt.access), Segments: tt.segs}
			r := c.call(proto.OpRegMR, mustJSON(req), fds...)
			if tt.want != "" {
				if r.h.Code != proto.CodeInvalid || !strings.Contains(r.msg(), tt.want) {
					t.Fatalf("reg_mr: %v %q, want %v saying %q", r.h.Code, r.msg(), proto.CodeInvalid, tt.want)
				}
				if got := d.TotalUsage()["locked"]; got != 0 {
					t.Errorf("a refused registration left %d bytes counted", got)
				}
				if after := openFDs(t); after > before {
					t.Errorf("the daemon kept %d of the refused registration's descriptors", after-before)
				}
				return
			}
			if r.h.Code != proto.CodeOK {
				t.Fatalf("reg_mr: %v %s", r.h.Code, r.msg())
			}
			var total uint64
			for _, s := range tt.segs {
				total += s.Length
			}
			if got := d.TotalUsage()["locked"]; got != total {
				t.Errorf("the daemon counts %d bytes locked, want the segments' %d", got, total)
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
	checkAlive(t, d.SocketPath())
}
