package daemon

import (
	"github.com/vrdma/vrdma/internal/proto"
)

// checkSegments checks a registration from several memfds (RegMRReq.Segments)
// against the descriptors that came with it, before anything is charged or
// mapped, and returns the bytes the segments map: every segment whole pages
// of its memfd, no more segments than proto.MaxMRSegments, one descriptor
// each, the region starting in the first page and ending in the last (no
// segment is mapped and charged for nothing). What only the descriptors can
// tell (seals, sizes) shm.MapSegments checks.
func checkSegments(req *proto.RegMRReq, nfds int, page uint64) (uint64, error) {
	n := len(req.Segments)
	if n > proto.MaxMRSegments {
		return 0, proto.Errorf(proto.CodeInvalid, "reg_mr: %d segments: a region is mapped from at most %d memfds", n, proto.MaxMRSegments)
	}
	if nfds != n {
		return 0, proto.Errorf(proto.CodeInvalid, "reg_mr: %d segments but %d descriptors: each segment comes with its memfd, in order", n, nfds)
	}
	var total uint64
	for i, s := range req.Segments {
		if s.Length == 0 || s.Offset%page != 0 || s.Length%page != 0 {
			return 0, proto.Errorf(proto.CodeInvalid, "reg_mr: segment %d (offset %d, length %d): a segment is whole pages of its memfd (multiples of %d bytes), at least one", i, s.Offset, s.Length, page)
		}
		if s.Offset+s.Length < s.Offset || total+s.Length < total {
			return 0, proto.Errorf(proto.CodeInvalid, "reg_mr: segment %d (offset %d, length %d) overflows 64 bits", i, s.Offset, s.Length)
		}
		total += s.Length
	}
	end := req.Offset + req.Length
	if req.Offset >= page || end < req.Offset || end > total || total-end >= page {
		return 0, proto.Errorf(proto.CodeInvalid, "reg_mr: bytes [%d, +%d) of %d bytes of segments: the region must start in the first page of the segments and end in the last", req.Offset, req.Length, total)
	}
	return total, nil
}
