package daemon

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
)

// FuzzCheckSegments decodes arbitrary registration bodies and checks them
// with any number of descriptors: never a panic, and a list it accepts
// has what shm.MapSegments and the charge rely on: at most MaxMRSegments
// whole-page segments, one descriptor each, whose total is what it
// returns, with the region starting in the first page and ending in the
// last.
func FuzzCheckSegments(f *testing.F) {
	f.Add([]byte(`{"pd":1,"length":100,"offset":10,"segments":[{"offset":0,"length":4096}]}`), 1)
	f.Add([]byte(`{"length":4096,"offset":4000,"segments":[{"offset":4096,"length":4096},{"offset":0,"length":4096}]}`), 2)
	f.Add([]byte(`{"length":1,"segments":[{"offset":18446744073709547520,"length":4096}]}`), 1)
	f.Add([]byte(`{"length":18446744073709551615,"offset":1,"segments":[{"offset":0,"length":8192}]}`), 1)
	f.Fuzz(func(t *testing.T, body []byte, nfds int) {
		var req proto.RegMRReq
		if json.Unmarshal(body, &req) != nil || len(req.Segments) == 0 {
			return
		}
		const page = 4096
		total, err := checkSegments(&req, nfds, page)
		if err != nil {
			var pe *proto.Error
			if !errors.As(err, &pe) || pe.Code != proto.CodeInvalid {
				t.Fatalf("refusal %v is not an invalid-argument error", err)
			}
			return
		}
		if len(req.Segments) > proto.MaxMRSegments || nfds != len(req.Segments) {
			t.Fatalf("accepted %d segments with %d descriptors", len(req.Segments), nfds)
		}
		var sum uint64
		for _, s := range req.Segments {
			if s.Length == 0 || s.Offset%page != 0 || s.Length%page != 0 || s.Offset+s.Length < s.Offset {
				t.Fatalf("accepted segment %+v", s)
			}
			sum += s.Length
		}
		end := req.Offset + req.Length
		if sum != total || req.Offset >= page || end < req.Offset || end > total || total-end >= page {
			t.Fatalf("accepted region [%d, +%d) of %d bytes of segments (total %d)", req.Offset, req.Length, sum, total)
		}
	})
}
